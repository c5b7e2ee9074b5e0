"""The machine a run is on: device and precision, memory, the allocator, CPU threads, quick calls first."""
