"""The process's own housekeeping: files written atomically without following
symlinks (``atomic``), the garbage collector paused over large allocations
(``gcpause``), the heap given back (``allocator``), work moved off the event loop
(``offthread``)."""
