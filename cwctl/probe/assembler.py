"""The agent bundle's assembler: the first thing the far side runs, before any module.

The one-line bootstrap (``bootstrap.py``) reads exactly this file's bytes from stdin and
execs them with ``__name__ == "__cwctl_assembler__"``. This code then reads the frames
that follow on the same unbuffered fd 0, one per module::

    <dotted.name> <size>\\n<size bytes: zlib of the module's source>

until ``run <dotted.name>\\n``. Each module is created under its real dotted name
(``types.ModuleType``, hung on its parent package, registered in ``sys.modules``) and its
source executed in it, in bundle order, as sshuttle's assembler does. Then the named
module is imported like any other and its ``main()`` called. Parent packages not in the
bundle (``cwctl``, ``cwctl.probe``) are empty packages that find nothing else, so a
module missing from the bundle fails loudly instead of importing a stray copy. Nothing
past the ``run`` line is read here: stdin stays the agent's control channel.

Python 3.8+, standard library only: it runs on every host.
"""

import os
import sys
import types
import zlib


def read_exactly(stream, size):
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError(f"bundle cut short: {len(data)} of {size} bytes")
        data.extend(chunk)
    return bytes(data)


def package(name):
    """``name`` as a package module, created empty (with its parents) if not there yet."""
    module = sys.modules.get(name)
    if module is None:
        module = new_module(name, is_package=True)
    return module


def new_module(name, is_package):
    parent, _, leaf = name.rpartition(".")
    module = types.ModuleType(name)
    module.__file__ = "<cwctl-agent>/" + name.replace(".", "/") + ".py"
    if is_package:
        module.__path__ = []
    module.__package__ = name if is_package else parent
    sys.modules[name] = module
    if parent:
        setattr(package(parent), leaf, module)
    return module


def assemble(stream):
    """Read the frames, create and run every module; the name of the one to run."""
    frames = []
    while True:
        words = stream.readline().decode("ascii").split()
        if len(words) != 2:
            raise ValueError(f"bad bundle frame header {words!r}")
        if words[0] == "run":
            main = words[1]
            break
        frames.append((words[0], zlib.decompress(read_exactly(stream, int(words[1])))))
    names = {name for name, _ in frames}
    packages = {name.rpartition(".")[0] for name in names}
    for name, source in frames:
        module = new_module(name, name in packages)
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    return main


if __name__ == "__cwctl_assembler__":
    import importlib

    _main = assemble(os.fdopen(0, "rb", 0, closefd=False))
    importlib.import_module(_main).main()
