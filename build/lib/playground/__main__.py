import sys

from playground.runtime.allocator import restart_with_fast_allocator

restart_with_fast_allocator()  # before PyTorch loads (playground/runtime/allocator.py)

from playground.cli.main import main  # noqa: E402
from playground.runtime.threads import configure_threads  # noqa: E402

configure_threads()  # the container's CPU quota, not the host's core count (playground/runtime/threads.py)
sys.exit(main())
