import sys

from playground.allocator import restart_with_fast_allocator

restart_with_fast_allocator()  # before PyTorch loads (playground/allocator.py)

from playground.cli import main  # noqa: E402
from playground.threads import configure_threads  # noqa: E402

configure_threads()  # the container's CPU quota, not the host's core count (playground/threads.py)
sys.exit(main())
