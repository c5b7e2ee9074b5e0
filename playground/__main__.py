import sys

from playground.allocator import restart_with_fast_allocator

restart_with_fast_allocator()  # before PyTorch loads (playground/allocator.py)

from playground.cli import main  # noqa: E402

sys.exit(main())
