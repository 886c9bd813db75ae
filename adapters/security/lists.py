"""Data only: the published lists of dangerous pickle globals, ours, and the inert allowlist.

Each peer list is recorded as published (module -> "*" for every global under that module and
its submodules, or a tuple of qualified names), with where it came from. They were read from the
peers' repositories, not imported: nothing here runs. :mod:`inspector.adapters.security.verdicts`
applies them; ``tests/test_verdict_corpus.py`` checks that every entry comes out ``dangerous``.
"""

from __future__ import annotations

ALL = "*"

SOURCES = {
    "picklescan": "github.com/mmaitre314/picklescan src/picklescan/scanner.py `_unsafe_globals` "
    "(commit f15d54da3dec, 2026-07-01)",
    "fickling": "github.com/trailofbits/fickling fickling/fickle.py `UNSAFE_IMPORTS` (modules, "
    "with `SAFE_BUILTINS` exempt from builtins) and fickling/analysis.py `UnsafeImportsML` "
    "(commit 854c99acd263, 2026-08-14)",
    "modelscan": "github.com/protectai/modelscan modelscan/settings.py `unsafe_globals` "
    "CRITICAL and HIGH (commit 8b8ed4b8ed4b, 2025-08-06)",
    "inspector": "this project: callables that run code or reach the outside world, found "
    "reading the standard library and torch (each entry says why)",
}

# picklescan: module -> "*" or qualified names.
PICKLESCAN: dict[str, str | tuple[str, ...]] = {
    "__builtin__": ("eval", "compile", "getattr", "apply", "exec", "open", "breakpoint"),
    "builtins": ("eval", "compile", "getattr", "apply", "exec", "open", "breakpoint"),
    "cloudpickle.cloudpickle": (
        "_builtin_type",
        "_make_function",
        "_function_setstate",
        "_make_cell",
        "_make_empty_cell",
        "subimport",
    ),
    "types": ("CodeType",),
    "aiohttp": ALL,
    "asyncio": ALL,
    "bdb": ALL,
    "commands": ALL,
    "ctypes": ALL,
    "functools": ("partial",),
    "httplib": ALL,
    "logging": ("FileHandler",),
    "_io": ("FileIO",),
    "numpy.f2py": ALL,
    "numpy.testing._private.utils": ALL,
    "nt": ALL,
    "posix": ALL,
    "_operator": ("attrgetter", "itemgetter", "methodcaller"),
    "operator": ("attrgetter", "itemgetter", "methodcaller"),
    "os": ALL,
    "requests.api": ALL,
    "runpy": ALL,
    "shutil": ALL,
    "socket": ALL,
    "ssl": ALL,
    "subprocess": ALL,
    "sys": ALL,
    "code": ("InteractiveInterpreter.runcode",),
    "cProfile": ALL,
    "distutils.file_util": ALL,
    "doctest": ("debug_script",),
    "ensurepip": ("_run_pip",),
    "idlelib.autocomplete": ("AutoComplete.get_entity", "AutoComplete.fetch_completions"),
    "idlelib.calltip": ("Calltip.fetch_tip", "get_entity"),
    "idlelib.debugobj": ("ObjectTreeItem.SetText",),
    "idlelib.pyshell": ("ModifiedInterpreter.runcode", "ModifiedInterpreter.runcommand"),
    "idlelib.run": ("Executive.runcode",),
    "imaplib": ("IMAP4_stream",),
    "lib2to3.pgen2.grammar": ("Grammar.loads",),
    "lib2to3.pgen2.pgen": ("ParserGenerator.make_label",),
    "pdb": ALL,
    "pickle": ALL,
    "_pickle": ALL,
    "pip": ALL,
    "pkgutil": ("resolve_name",),
    "pty": ALL,
    "profile": ALL,
    "pydoc": ALL,
    "test": ALL,
    "timeit": ALL,
    "torch._dynamo.guards": ("GuardBuilder.get",),
    "torch._inductor.codecache": ("compile_file",),
    "torch.fx.experimental.symbolic_shapes": ("ShapeEnv.evaluate_guards_expression",),
    "torch.jit.unsupported_tensor_ops": ("execWrapper",),
    "torch.serialization": ("load",),
    "torch.utils._config_module": ("ConfigModule.load_config",),
    "torch.utils.bottleneck.__main__": ("run_cprofile", "run_autograd_prof"),
    "torch.utils.collect_env": ("run",),
    "torch.utils.data.datapipes.utils.decoder": ("basichandlers",),
    "trace": ("Trace.run", "Trace.runctx"),
    "urllib.request": ALL,
    "uuid": ALL,
    "venv": ALL,
    "webbrowser": ALL,
    "_osx_support": ALL,
    "_aix_support": ALL,
    "_pyrepl": ALL,
}

# fickling UNSAFE_IMPORTS: every global of these modules (any component of the dotted name).
FICKLING_MODULES: tuple[str, ...] = (
    "__builtin__", "__builtins__", "builtins", "os", "posix", "nt", "subprocess", "sys", "pty",
    "commands", "multiprocessing", "_posixsubprocess", "code", "codeop", "runpy", "marshal",
    "types", "compile", "exec", "eval", "doctest", "_interpreters", "_xxsubinterpreters",
    "importlib", "_frozen_importlib", "_frozen_importlib_external", "_imp", "imp", "pkgutil",
    "zipimport", "gc", "site", "unittest", "inspect", "test", "_operator", "operator",
    "functools", "cProfile", "profile", "pdb", "bdb", "timeit", "trace", "socket", "ssl",
    "httplib", "http", "urllib", "urllib2", "requests", "aiohttp", "asyncio", "webbrowser",
    "smtplib", "imaplib", "ftplib", "poplib", "telnetlib", "nntplib", "ctypes", "_ctypes",
    "pickle", "_pickle", "dill", "cloudpickle", "joblib", "shutil", "tempfile", "filecmp",
    "distutils", "pydoc", "pexpect", "pipes", "venv", "ensurepip", "pip", "idlelib", "lib2to3",
    "socketserver", "xmlrpc", "signal", "_signal", "threading", "_thread", "atexit", "sqlite3",
    "_sqlite3", "fileinput", "glob", "platform", "linecache", "difflib", "compileall",
    "py_compile", "mmap", "select", "selectors", "logging", "syslog", "tarfile", "zipfile",
    "shelve", "uuid", "_osx_support", "_aix_support",
)  # fmt: skip
# fickling SAFE_BUILTINS: the builtins fickling itself does not flag (its exemption, kept so
# the lists are applied as published; our own rule still makes any *called* one dangerous
# unless it is on INERT_CALLABLES below).
FICKLING_SAFE_BUILTINS: tuple[str, ...] = (
    "bool", "int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple", "set",
    "frozenset", "dict", "len", "abs", "sum", "min", "max", "round", "pow", "divmod", "sorted",
    "reversed", "enumerate", "zip", "range", "map", "filter", "slice", "iter", "next", "all",
    "any", "hash", "id", "repr", "ascii", "bin", "hex", "oct", "ord", "chr", "isinstance",
    "issubclass", "object", "callable", "format",
)  # fmt: skip
# fickling flags every private (underscore) standard-library module except these exact names.
FICKLING_PRIVATE_STDLIB_EXEMPT: tuple[str, ...] = ("_codecs.encode",)
# fickling UnsafeImportsML: whole modules, then single names.
FICKLING_ML_MODULES: tuple[str, ...] = (
    "torch.hub", "torch._dynamo", "torch._inductor", "torch.jit", "torch.compile",
    "numpy.f2py", "numpy.distutils",
)  # fmt: skip
FICKLING_ML_NAMES: dict[str, tuple[str, ...]] = {
    "torch": ("load", "compile"),
    "torch.storage": ("_load_from_bytes",),
    "torch.utils._config_module": ("ConfigModule",),
    "torch.distributed.elastic.rendezvous.api": ("basichandlers",),
    "numpy.testing._private.utils": ("runstring",),
    "_io": ("FileIO", "open"),
    "io": ("FileIO", "open"),
}

# modelscan unsafe_globals, CRITICAL and HIGH.
MODELSCAN: dict[str, str | tuple[str, ...]] = {
    "__builtin__": (
        "eval", "compile", "getattr", "apply", "exec", "open", "breakpoint", "__import__",
    ),
    "builtins": (
        "eval", "compile", "getattr", "apply", "exec", "open", "breakpoint", "__import__",
    ),
    "runpy": ALL,
    "os": ALL,
    "nt": ALL,
    "posix": ALL,
    "socket": ALL,
    "subprocess": ALL,
    "sys": ALL,
    "operator": ("attrgetter",),
    "pty": ALL,
    "pickle": ALL,
    "_pickle": ALL,
    "bdb": ALL,
    "pdb": ALL,
    "shutil": ALL,
    "asyncio": ALL,
    "webbrowser": ALL,
    "httplib": ALL,
    "requests.api": ALL,
    "aiohttp.client": ALL,
}  # fmt: skip

# Ours, beyond the peers' lists: module -> "*" or names; the comment says why.
INSPECTOR: dict[str, str | tuple[str, ...]] = {
    "builtins": (
        "setattr", "delattr", "__import__", "input", "globals", "locals", "vars", "execfile",
        "file", "reload", "memoryview", "help", "exit", "quit",
    ),  # attribute/namespace access, import machinery, interpreter control
    "antigravity": ALL,  # importing it opens a web browser
    "this": ALL,  # importing it prints (import side effect)
    "code": ALL,  # interactive interpreters: interact(), InteractiveConsole.push
    "codecs": ("open", "EncodedFile", "StreamReaderWriter"),  # file access
    "io": ("open", "open_code", "FileIO", "BufferedReader", "BufferedWriter", "TextIOWrapper"),
    # pathlib: constructing a path touches nothing (on the allowlist below); its methods
    # (Path.write_text, Path.unlink) reach the file system
    "pathlib": ("Path.write_text", "Path.write_bytes", "Path.read_text", "Path.read_bytes",
                "Path.unlink", "Path.open", "Path.touch", "Path.mkdir", "Path.rmdir",
                "Path.rename", "Path.replace", "Path.symlink_to", "Path.chmod"),
    "tempfile": ALL,  # creates files
    "dill": ALL,  # nested pickles that carry code
    "cloudpickle": ALL,  # ditto
    "marshal": ALL,  # loads(code bytes) -> a code object
    "zipimport": ALL,  # imports code from archives
    "numpy": ("load", "loads", "fromfile", "memmap", "save", "savez", "tofile"),  # files, pickles
    "numpy.lib.npyio": ALL,  # numpy.load with allow_pickle
    "numpy.lib.format": ("read_array", "write_array", "open_memmap"),  # nested pickle / files
    "numpy.ctypeslib": ALL,  # load_library loads a shared object
    "numpy.distutils": ALL,  # build commands
    "pandas.io.pickle": ALL,  # read_pickle: a pickle inside the pickle
    "pandas": ("read_pickle", "eval"),  # nested pickle; expression evaluation
    "scipy.io": ALL,  # reads/writes files
    "joblib": ALL,  # nested pickles
    "torch": ("load", "save", "compile"),  # nested pickle, file write, compilation
    "torch.hub": ALL,  # downloads and runs code (load, load_state_dict_from_url)
    "torch.serialization": ("load", "save", "_load", "_legacy_load"),
    "torch.storage": ("_load_from_bytes",),  # torch.load of bytes inside the pickle
    "torch.jit": ALL,  # compiles and runs TorchScript (load, _pickle excepted in the allowlist)
    "torch._dynamo": ALL,  # guards evaluate expressions
    "torch._inductor": ALL,  # compiles and runs generated code
    "torch.utils.cpp_extension": ALL,  # compiles and loads native code
    "torch.utils.collect_env": ALL,  # runs commands
    "torch.ops": ALL,  # loads operator libraries (load_library)
    "torch.package": ALL,  # PackageImporter imports code from an archive
    "torch.distributed": ALL,  # network rendezvous and RPC
    "torch.multiprocessing": ALL,  # processes
    "torch._C": ALL,  # raw bindings, e.g. _jit_* compile paths
    "torch.testing._internal": ALL,  # runs subprocesses
    "numba": ALL,  # compiles code
    "Cython": ALL,  # compiles code
    "IPython": ALL,  # shells, magics
    "jinja2": ALL,  # templates run expressions
    "yaml": ("load", "unsafe_load", "full_load", "load_all", "unsafe_load_all"),  # tags -> code
    "xmlrpc": ALL,  # network
    "smtplib": ALL,  # network
    "ftplib": ALL,  # network
    "poplib": ALL,  # network
    "telnetlib": ALL,  # network
    "nntplib": ALL,  # network
    "http": ALL,  # network (http.client, http.server)
    "urllib": ALL,  # network (urlopen, urlretrieve)
    "urllib3": ALL,  # network
    "requests": ALL,  # network
    "httpx": ALL,  # network
    "aiohttp": ALL,  # network
    "paramiko": ALL,  # ssh
    "fabric": ALL,  # ssh
    "boto3": ALL,  # cloud APIs
    "botocore": ALL,  # cloud APIs
    "_xxsubinterpreters": ALL,  # run source in a subinterpreter
    "_interpreters": ALL,  # ditto (3.13+)
    "_posixsubprocess": ALL,  # fork_exec
    "posixpath": ("expanduser",),  # reads the environment (harmless alone; kept off the allowlist)
    "copyreg": ("add_extension", "pickle", "constructor", "remove_extension"),  # registry changes
    "importlib": ALL,  # import_module and friends
    "_frozen_importlib": ALL,  # import machinery
    "_frozen_importlib_external": ALL,  # import machinery
    "imp": ALL,  # load_source
    "site": ALL,  # addsitedir executes .pth files
    "ctypes": ALL,  # native calls
    "_ctypes": ALL,  # native calls
    "multiprocessing": ALL,  # processes
    "concurrent": ALL,  # executors run callables
    "threading": ALL,  # Thread(target=...).start
    "_thread": ALL,  # start_new_thread
    "signal": ALL,  # handlers
    "atexit": ALL,  # register(callable)
    "sched": ALL,  # scheduler runs callables
    "weakref": ("finalize",),  # runs a callable at collection time
    "contextlib": ALL,  # ExitStack.callback and friends
    "gc": ALL,  # get_objects/get_referrers reach every object
    "inspect": ALL,  # getattr_static etc.
    "operator": ALL,  # attrgetter/methodcaller/call reach any attribute or method
    "_operator": ALL,  # ditto
    "functools": ALL,  # partial/reduce call their arguments
    "itertools": ("starmap",),  # calls its function argument
    "builtins.type": ALL,  # type(name, bases, dict) makes classes; __subclasses__
    # -- issue 26: classes whose methods the unpickler itself calls (BUILD -> __setstate__,
    # SETITEM -> __setitem__, APPEND -> append, __del__ at collection) and that touch files:
    "mailbox": ALL,  # Maildir/MH/mbox.__setitem__ writes a message file at a chosen path
    "dbm": ALL,  # dbm.dumb._Database.__del__ -> close -> _commit writes and renames its files
    "wave": ("Wave_write", "open"),  # __del__ -> close writes the header to its file
    "aifc": ("Aifc_write", "open"),  # ditto
    "sunau": ("Au_write", "open"),  # ditto
    "gzip": ("GzipFile", "open"),  # opens files; close (IOBase.__del__) writes the trailer
    "bz2": ("BZ2File", "open"),  # opens files
    "lzma": ("LZMAFile", "open"),  # opens files
    "tkinter": ALL,  # Tk() starts a Tcl interpreter; Tcl().eval runs Tcl code
    "rlcompleter": ALL,  # Completer.attr_matches evaluates the text before the dot
    "pstats": ("Stats",),  # load_stats reads marshal files
    "xml.sax": ("make_parser",),  # imports the modules it is given by name
    # typing evaluates the strings of annotations (eval in the owner's globals)
    "typing": ("get_type_hints", "_eval_type", "ForwardRef._evaluate", "ForwardRef.evaluate",
               "evaluate_forward_ref", "_type_convert"),
    "annotationlib": ALL,  # call_annotate_function / get_annotations(eval_str) evaluate
}  # fmt: skip

# What a listed global does, by dotted prefix (the longest prefix wins): the phrase a verdict
# says *why* with ("calls `os.system` (reaches the operating system)").
EFFECTS: dict[str, str] = {
    **dict.fromkeys(("os", "posix", "nt"), "reaches the operating system (commands, files)"),
    **dict.fromkeys(("posixpath.expanduser", "sys", "signal", "_signal",
                     "platform", "resource", "mmap", "gc", "ctypes", "_ctypes", "inspect",
                     "builtins.getattr", "builtins.setattr", "builtins.delattr",
                     "builtins.globals", "builtins.locals", "builtins.vars", "torch._C",
                     "numpy.ctypeslib", "_thread", "threading", "_xxsubinterpreters",
                     "_interpreters", "builtins.memoryview"),
                    "reaches interpreter internals"),
    **dict.fromkeys(("subprocess", "_posixsubprocess", "pty", "commands", "popen2", "pexpect",
                     "multiprocessing", "torch.multiprocessing", "concurrent", "asyncio",
                     "torch.utils.collect_env", "uuid", "_osx_support", "_aix_support",
                     "pip", "ensurepip", "venv", "torch.testing._internal"),
                    "runs processes"),
    **dict.fromkeys(("socket", "ssl", "http", "httplib", "urllib", "urllib2", "urllib3",
                     "requests", "httpx", "aiohttp", "smtplib", "ftplib", "poplib", "imaplib",
                     "nntplib", "telnetlib", "xmlrpc", "socketserver", "webbrowser", "paramiko",
                     "fabric", "boto3", "botocore", "torch.hub", "torch.distributed",
                     "antigravity", "select", "selectors"),
                    "reaches the network"),
    **dict.fromkeys(("mailbox", "dbm", "shelve", "tempfile", "zipfile", "tarfile", "shutil",
                     "sqlite3", "_sqlite3", "logging", "wave", "aifc", "sunau", "filecmp",
                     "distutils", "numpy.save", "numpy.savez", "numpy.tofile", "numpy.memmap",
                     "numpy.lib.format.write_array", "numpy.lib.format.open_memmap",
                     "torch.save", "torch.serialization.save", "scipy.io", "syslog",
                     "pathlib.Path.write_text", "pathlib.Path.write_bytes", "pathlib.Path.unlink",
                     "pathlib.Path.touch", "pathlib.Path.mkdir", "pathlib.Path.rmdir",
                     "pathlib.Path.rename", "pathlib.Path.replace", "pathlib.Path.symlink_to",
                     "pathlib.Path.chmod"),
                    "writes files"),
    **dict.fromkeys(("io", "_io", "codecs", "gzip", "bz2", "lzma", "fileinput", "glob",
                     "linecache", "builtins.open", "builtins.file", "pstats", "pathlib",
                     "numpy.fromfile", "builtins.input"),
                    "opens files"),
    **dict.fromkeys(("builtins.eval", "builtins.exec", "builtins.compile", "builtins.execfile",
                     "typing", "annotationlib", "pandas.eval", "rlcompleter", "jinja2", "yaml",
                     "code", "codeop", "torch._dynamo", "torch.fx", "tkinter"),
                    "evaluates strings"),
    **dict.fromkeys(("runpy", "pdb", "bdb", "timeit", "cProfile", "profile", "trace",
                     "doctest", "pydoc", "idlelib", "lib2to3", "unittest", "test", "IPython",
                     "marshal", "torch.jit", "torch._inductor", "torch.compile", "torch.package",
                     "torch.utils.cpp_extension", "torch.ops", "numba", "Cython", "numpy.f2py",
                     "numpy.distutils", "numpy.testing", "builtins.breakpoint", "builtins.help",
                     "sched", "atexit", "weakref.finalize", "contextlib", "operator",
                     "_operator", "functools", "itertools.starmap", "builtins.apply"),
                    "runs code it is given"),
    **dict.fromkeys(("pickle", "_pickle", "dill", "cloudpickle", "joblib", "numpy.load",
                     "numpy.loads", "numpy.lib.npyio", "numpy.lib.format.read_array",
                     "pandas.read_pickle", "pandas.io.pickle", "torch.load",
                     "torch.serialization.load", "torch.serialization._load",
                     "torch.serialization._legacy_load", "torch.storage._load_from_bytes",
                     "torch.utils._config_module"),
                    "loads a pickle (code) inside the pickle"),
    **dict.fromkeys(("importlib", "builtins.__import__", "__import__", "_frozen_importlib",
                     "_frozen_importlib_external", "_imp", "imp", "pkgutil", "zipimport", "site",
                     "xml.sax.make_parser", "this"),
                    "imports code"),
    **dict.fromkeys(("builtins.type", "types", "copyreg"), "builds classes or changes pickling"),
}  # fmt: skip

# Dangerous when a loader calls or constructs them (they build a class: a metaclass runs, and
# the bases' __init_subclass__ and the namespace's __set_name__ with it); only named, a type
# reference is data. Checked after the lists, before the allowlist.
BUILDS_CLASS: dict[str, str] = {
    "abc.ABCMeta": "a metaclass",
    "enum.EnumMeta": "a metaclass",
    "enum.EnumType": "a metaclass",
    "enum.Enum": "Enum('Name', 'A B') builds an Enum class",
    "enum.IntEnum": "the functional API builds a class",
    "enum.StrEnum": "the functional API builds a class",
    "enum.Flag": "the functional API builds a class",
    "enum.IntFlag": "the functional API builds a class",
    "typing.NamedTuple": "builds a class",
    "typing.NamedTupleMeta": "a metaclass",
    "typing.TypedDict": "builds a class",
    "typing._TypedDictMeta": "a metaclass",
    "typing._ProtocolMeta": "a metaclass",
    "typing.Protocol": "builds a class",
    "typing.Generic": "builds a class",
    "dataclasses.make_dataclass": "builds a class and runs the code it generates",
    "collections.namedtuple": "builds a class and runs the code it generates",
}

# Python's own special names (the data model's methods and attributes) that a BUILD state must
# not set on an object: a loader, copy, the next pickling, or a BUILD on a class use them. The
# names defined by the builtin types are added at import (verdicts.SPECIAL_NAMES); a library's
# own dunder data (torch's `__overloads__`) is not among them.
SPECIAL_NAMES: tuple[str, ...] = (
    "__getattr__", "__call__", "__index__", "__iter__", "__next__", "__enter__", "__exit__",
    "__del__", "__set_name__", "__init_subclass__", "__class_getitem__", "__instancecheck__",
    "__subclasscheck__", "__missing__", "__fspath__", "__await__", "__aiter__", "__anext__",
    "__aenter__", "__aexit__", "__length_hint__", "__bytes__", "__complex__", "__round__",
    "__trunc__", "__floor__", "__ceil__", "__get__", "__set__", "__delete__", "__copy__",
    "__deepcopy__", "__getinitargs__", "__getnewargs__", "__getnewargs_ex__", "__annotations__",
    "__slots__", "__weakref__", "__setstate__", "__getstate__", "__reduce__", "__reduce_ex__",
    "__class__", "__dict__", "__bool__", "__len__", "__contains__", "__getitem__",
    "__setitem__", "__delitem__", "__hash__", "__eq__", "__format__", "__str__", "__repr__",
    "__globals__", "__code__", "__closure__", "__defaults__", "__kwdefaults__", "__builtins__",
)  # fmt: skip

# Dunder attributes whose presence anywhere in a dotted chain reaches interpreter internals
# (function globals, builtins, subclass lists, frames, code): `nn.Module.__init__.__globals__`.
DANGEROUS_ATTRIBUTES: tuple[str, ...] = (
    "__globals__", "__builtins__", "__subclasses__", "__getattribute__", "__getattr__",
    "__code__", "__closure__", "__func__", "__self__", "__dict__", "__class__", "__base__",
    "__bases__", "__mro__", "__import__", "__loader__", "__spec__", "__reduce__",
    "__reduce_ex__", "__call__", "__init__", "__new__", "__setattr__", "__delattr__",
    "__setstate__", "__getstate__", "__init_subclass__", "__class_getitem__", "f_globals",
    "f_locals", "f_back", "gi_frame", "cr_frame", "tb_frame",
)  # fmt: skip

# The allowlist: callables a loader may call that are inert (they build plain values and
# neither call their arguments nor reach the outside world). A global on it is `safe` however
# the pickle uses it. Keys are the Python 3 dotted names; values say why each one is inert.
INERT_CALLABLES: dict[str, str] = {
    # -- containers and scalars from builtins (all in fickling's SAFE_BUILTINS)
    "collections.OrderedDict": "dict subclass; torch state dicts are OrderedDicts",
    "collections.Counter": "dict subclass built from the given mapping",
    "collections.defaultdict": "dict subclass; the factory is recorded, called only on "
    "missing keys (never during loading)",
    "builtins.set": "set of the given items",
    "builtins.frozenset": "frozenset of the given items",
    "builtins.dict": "dict of the given items",
    "builtins.list": "list of the given items",
    "builtins.tuple": "tuple of the given items",
    "builtins.slice": "slice object, no evaluation",
    "builtins.complex": "number from numbers",
    "builtins.float": "number from a number or numeric string",
    "builtins.int": "number from a number or numeric string",
    "builtins.bool": "truth value",
    "builtins.str": "text (protocol 0 writes some text this way)",
    "builtins.object": "the base class; the usual `base` of copyreg._reconstructor",
    "builtins.bytes": "bytes from bytes or (str, encoding); size-capped by the reader",
    "builtins.bytearray": "bytearray from bytes or (str, encoding); size-capped by the reader",
    "builtins.range": "lazy integer range",
    # pure builtins: computed on plain values by the reader; on an object of the file they call
    # its class's special method (__index__, __len__, __hash__, ...), recorded on that class
    "builtins.len": "length of a plain value",
    "builtins.abs": "absolute value",
    "builtins.min": "smallest of plain values (no key function: REDUCE passes no keywords)",
    "builtins.max": "largest of plain values (ditto)",
    "builtins.sum": "sum of plain numbers",
    "builtins.round": "rounded number",
    "builtins.divmod": "quotient and remainder",
    "builtins.all": "truth of plain values",
    "builtins.any": "truth of plain values",
    "builtins.hash": "hash of a plain value",
    "builtins.repr": "text of a plain value",
    "builtins.ascii": "text of a plain value",
    "builtins.format": "text of a plain value",
    "builtins.ord": "code point",
    "builtins.chr": "character",
    "builtins.hex": "text of an int",
    "builtins.oct": "text of an int",
    "builtins.bin": "text of an int",
    "builtins.sorted": "sorted plain values",
    "builtins.reversed": "reversed sequence",
    "builtins.iter": "iterator over a plain value",
    # -- the pickle protocol's own helpers
    "_codecs.encode": "protocol 2 spells bytes as encode(str, 'latin1'); text codecs only",
    "copyreg._reconstructor": "protocol 0/1 NEWOBJ: constructs `cls`; a foreign `base` is "
    "recorded as called",
    "copyreg.__newobj__": "NEWOBJ as a function: constructs `cls` without __init__",
    "copyreg.__newobj_ex__": "NEWOBJ_EX as a function: constructs `cls` without __init__",
    "copyreg._reconstruct": "old spelling of _reconstructor",
    # -- enums: calling an Enum class with a value looks a member up (EnumMeta.__call__); these
    # are the ones transformers' Trainer pickles into every training_args.bin (checked to be Enum
    # subclasses by fixtures/security/make_fixtures.py, transformers 5.23.0, accelerate)
    "transformers.trainer_utils.IntervalStrategy": "Enum member by value",
    "transformers.trainer_utils.SaveStrategy": "Enum member by value",
    "transformers.trainer_utils.HubStrategy": "Enum member by value",
    "transformers.trainer_utils.SchedulerType": "Enum member by value",
    "transformers.training_args.OptimizerNames": "Enum member by value",
    "accelerate.utils.dataclasses.DistributedType": "Enum member by value",
    # Megatron-LM's args (megatron/training/arguments.py, core_v0.16.1: exit_signal,
    # attention_backend; checked to be Enum subclasses by fixtures/megatron/make_megatron.py)
    "signal.Signals": "IntEnum member by value (a lookup: no handler is installed)",
    "megatron.core.transformer.enums.AttnBackend": "Enum member by value",
    # -- paths: a value (hyperparameters such as Lightning's default_root_dir); no I/O on build
    "pathlib.PosixPath": "path object built from its parts",
    "pathlib.WindowsPath": "path object built from its parts",
    "pathlib.PurePosixPath": "path object built from its parts",
    "pathlib.PureWindowsPath": "path object built from its parts",
    "pathlib.Path": "path object built from its parts",
    "pathlib._local.PosixPath": "same, Python 3.13 module path",
    "pathlib._local.WindowsPath": "same, Python 3.13 module path",
    "pathlib._local.PurePosixPath": "same, Python 3.13 module path",
    "pathlib._local.PureWindowsPath": "same, Python 3.13 module path",
    # -- datetime / decimal / fractions / uuid-free value types
    "datetime.datetime": "value type built from bytes and a tzinfo",
    "datetime.date": "value type",
    "datetime.time": "value type",
    "datetime.timedelta": "value type",
    "datetime.timezone": "value type",
    "decimal.Decimal": "number from text, no evaluation",
    "fractions.Fraction": "number from numbers or text",
    # -- NumPy array and scalar reconstruction
    "numpy.core.multiarray._reconstruct": "empty ndarray of a dtype; data comes from BUILD",
    "numpy._core.multiarray._reconstruct": "same, NumPy 2 module path",
    "numpy.core.multiarray.scalar": "scalar from a dtype and its raw bytes",
    "numpy._core.multiarray.scalar": "same, NumPy 2 module path",
    "numpy.ndarray": "the array type (argument of _reconstruct)",
    "numpy.dtype": "dtype from a type code; no code runs",
    "numpy.core.numeric._frombuffer": "array from bytes (NumPy >= 1.24 pickles)",
    "numpy._core.numeric._frombuffer": "same, NumPy 2 module path",
    # numpy/random/_pickle.py (numpy 2.2.6, read): each helper builds from a bit generator
    # *name*; given a class or a ctor argument it calls it: CALLS_ARGUMENT says which, so the
    # argument's own verdict decides (an allowlisted bit generator below, or a dangerous callable)
    "numpy.random._pickle.__randomstate_ctor": "RandomState of a named bit generator",
    "numpy.random._pickle.__bit_generator_ctor": "bit generator of a named kind",
    "numpy.random._pickle.__generator_ctor": "Generator of a named bit generator",
    # the bit generators `__bit_generator_ctor(cls)` calls with no argument (np.random.
    # default_rng(0) pickles PCG64 this way): __init__(seed=None) seeds from a SeedSequence, the
    # BUILD state goes to their `state` setter, which checks the dict (numpy/random/_pcg64.pyx,
    # _mt19937.pyx, _philox.pyx, _sfc64.pyx, bit_generator.pyx)
    "numpy.random._pcg64.PCG64": "bit generator; state set from a checked dict",
    "numpy.random._pcg64.PCG64DXSM": "bit generator; state set from a checked dict",
    "numpy.random._mt19937.MT19937": "bit generator; state set from a checked dict",
    "numpy.random._philox.Philox": "bit generator; state set from a checked dict",
    "numpy.random._sfc64.SFC64": "bit generator; state set from a checked dict",
    # SeedSequence has no __reduce__: Cython generates `__pyx_unpickle_SeedSequence(type,
    # checksum, state)`, which checks the checksum, calls SeedSequence.__new__(type) (no
    # __init__) and assigns the typed fields of `state` (Cython/Compiler/ParseTreeTransforms.py,
    # the pickle injection, read); the class is its `type` argument
    "numpy.random.bit_generator.__pyx_unpickle_SeedSequence": "SeedSequence from its fields",
    "numpy.random.bit_generator.SeedSequence": "the class __pyx_unpickle_SeedSequence builds",
    # -- torch: the rebuild functions torch.save writes, with the reader's own implementations
    "torch._utils._rebuild_tensor": "tensor view of a storage (metadata only)",
    "torch._utils._rebuild_tensor_v2": "tensor view of a storage (metadata only)",
    "torch._utils._rebuild_tensor_v3": "tensor view of a storage with a dtype",
    "torch._utils._rebuild_parameter": "Parameter around a rebuilt tensor",
    "torch._utils._rebuild_parameter_with_state": "Parameter with recorded attributes",
    "torch._utils._rebuild_qtensor": "quantized tensor view",
    "torch._utils._rebuild_sparse_tensor": "sparse tensor from index/value tensors",
    "torch._utils._rebuild_sparse_csr_tensor": "CSR tensor from tensors",
    "torch._utils._rebuild_nested_tensor": "nested tensor from buffers",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor": "device copy of a tensor",
    "torch._utils._rebuild_device_tensor_from_numpy": "tensor from an array",
    "torch._utils._rebuild_xla_tensor": "tensor from an array",
    "torch._utils._rebuild_meta_tensor_no_storage": "meta tensor: shape and dtype only",
    "torch._utils._rebuild_wrapper_subclass": "wrapper subclass shell (the subclass is "
    "recorded as constructed)",
    "torch._tensor._rebuild_from_type_v2": "calls its `func` argument (recorded as called) and "
    "re-types the result",
    "torch._tensor._rebuild_from_type": "older spelling of the above",
    "torch.nn.parameter.Parameter": "Parameter wrapper of a tensor",
    "torch.nn.Parameter": "same, short path",
    "torch.Size": "tuple of ints",
    "torch.device": "device name",
    "torch.serialization._get_layout": "layout constant by name",
    # -- torch Distributed Checkpoint `.metadata` (torch 2.13 torch/distributed/checkpoint/
    # metadata.py, filesystem.py, planner.py, read; the globals of real dcp.save and
    # torch_save_to_dcp output). Plain dataclasses: NEWOBJ + BUILD fills __dict__; the only
    # __setstate__ (TensorProperties) unpacks a 5-tuple and maps an enum to a memory format.
    "torch.distributed.checkpoint.metadata.Metadata": "dataclass: state dict metadata",
    "torch.distributed.checkpoint.metadata.StorageMeta": "dataclass: checkpoint id, save id",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata": "dataclass: properties, "
    "size, chunks",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata": "empty dataclass",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata": "dataclass: offsets, sizes",
    "torch.distributed.checkpoint.metadata.TensorProperties": "dataclass; __setstate__ unpacks "
    "(dtype, layout, requires_grad, memory format enum, pin_memory)",
    "torch.distributed.checkpoint.metadata.MetadataIndex": "frozen dataclass: fqn, offset",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING": "Enum member by value",
    "torch.distributed.checkpoint.filesystem._StorageInfo": "dataclass: relative path, offset, "
    "length (a path the loader opens under the checkpoint directory, never at unpickling)",
    "torch.distributed.checkpoint.filesystem._StoragePrefix": "dataclass: file name prefix",
    "torch.distributed.checkpoint.planner.WriteItemType": "Enum member by value",
    "torch.distributed.checkpoint.planner.LoadItemType": "Enum member by value",
    "torch.distributed.checkpoint.planner.BytesIOWriteData": "frozen dataclass: nbytes",
    "torch.distributed.checkpoint.planner.TensorWriteData": "frozen dataclass: chunk, "
    "properties, size",
    "torch.distributed.checkpoint.planner.WriteItem": "frozen dataclass: index, type, data",
    "torch.distributed.checkpoint.planner.ReadItem": "frozen dataclass: indices and sizes",
    "torch.distributed.checkpoint.planner.SavePlan": "frozen dataclass: items, plan data",
    "torch.distributed.checkpoint.planner.LoadPlan": "dataclass: items, plan data",
    # -- DeepSpeed optimizer/model states (deepspeed 0.19.8, read: runtime/zero/config.py,
    # utils/tensor_fragment.py, runtime/fp16/loss_scaler.py, runtime/config_utils.py; the
    # globals of real ZeRO stage 0-3 checkpoints, fp32 and bf16, written on CPU). No
    # __setstate__/__reduce__: an int Enum by value, dataclasses and plain objects whose BUILD
    # fills __dict__.
    "deepspeed.runtime.zero.config.ZeroStageEnum": "int Enum member by value",
    "deepspeed.utils.tensor_fragment.fragment_address": "dataclass: numel, start",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler": "plain object (cur_scale, dynamic)",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler": "plain object (scale counters); "
    "fp16 runs pickle it in place of LossScaler",
    "joblib.numpy_pickle.NumpyArrayWrapper": "joblib's array header (shape, dtype, order); the "
    "array's bytes follow it raw (fickling lists all of joblib for joblib.load)",
    "torch.storage.UntypedStorage": "storage type tag in a persistent id (torch >= 2.0)",
    "torch.storage.TypedStorage": "storage type tag in a persistent id",
    "torch.Tensor": "the tensor class (argument of _rebuild_from_type_v2)",
    "torch._tensor.Tensor": "same, defining module",
    "torch.jit._pickle.build_intlist": "TorchScript data.pkl: list of ints",
    "torch.jit._pickle.build_floatlist": "TorchScript data.pkl: list of floats",
    "torch.jit._pickle.build_boollist": "TorchScript data.pkl: list of bools",
    "torch.jit._pickle.build_tensorlist": "TorchScript data.pkl: list of tensors",
    "torch.jit._pickle.build_doublelist": "TorchScript data.pkl: list of floats",
    "torch.jit._pickle.restore_type_tag": "TorchScript data.pkl: returns its first argument",
}

# Named constants (not callables) a loader resolves and never calls: torch dtypes, storage
# types, memory formats, layouts, quantization schemes. Matched by prefix + exact suffix set.
TORCH_CONSTANT_NAMES: tuple[str, ...] = (
    # dtypes
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "complex32",
    "complex64", "complex128", "cfloat", "cdouble", "chalf", "uint8", "int8", "int16", "short",
    "int32", "int", "int64", "long", "bool", "quint8", "qint8", "qint32", "quint4x2",
    "quint2x4", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2", "uint16", "uint32", "uint64", "bits8", "bits16",
    "bits1x8", "bits2x4", "bits4x2",
    # storage types
    "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage",
    "IntStorage", "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage",
    "ComplexFloatStorage", "ComplexDoubleStorage", "QUInt8Storage", "QInt8Storage",
    "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage", "UntypedStorage", "TypedStorage",
    # memory formats, layouts, qschemes
    "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "strided",
    "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn",
    "jagged", "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
    "per_channel_symmetric", "per_channel_affine_float_qparams",
)  # fmt: skip

# Allowlisted callables that call (or construct) one of their arguments, exactly per position
# (read in their source): function name -> {position: how}. "called": always called;
# "called if a class": called when it is a class (a loader passes names and instances through);
# "constructed": cls.__new__(arg) without __init__, then its __setstate__ gets the state;
# "values called": the values of that mapping are called later (hooks).
CALLS_ARGUMENT: dict[str, dict[int, str]] = {
    # copyreg.py: base.__new__(cls, state); base.__init__(obj, state) unless base is object
    "copyreg._reconstructor": {0: "constructed", 1: "called"},
    "copyreg._reconstruct": {0: "constructed", 1: "called"},
    "copyreg.__newobj__": {0: "constructed"},  # cls.__new__(cls, *args)
    "copyreg.__newobj_ex__": {0: "constructed"},  # cls.__new__(cls, *args, **kwargs)
    # torch/_tensor.py: ret = func(*args); ret.as_subclass(new_type); new_type's __setstate__
    "torch._tensor._rebuild_from_type_v2": {0: "called", 1: "constructed"},
    "torch._tensor._rebuild_from_type": {0: "called", 1: "constructed"},
    # torch/_utils.py: Tensor._make_wrapper_subclass(cls, ...); param._backward_hooks = hooks
    "torch._utils._rebuild_wrapper_subclass": {0: "constructed"},
    "torch._utils._rebuild_tensor_v2": {5: "values called"},  # tensor._backward_hooks
    "torch._utils._rebuild_tensor_v3": {5: "values called"},
    "torch._utils._rebuild_qtensor": {6: "values called"},
    # numpy/_core/src/multiarray: _reconstruct(subtype, shape, dtype) makes a `subtype` array
    "numpy.core.multiarray._reconstruct": {0: "constructed"},
    "numpy._core.multiarray._reconstruct": {0: "constructed"},
    "torch._utils._rebuild_parameter_with_state": {2: "values called"},
    "torch._utils._rebuild_parameter": {2: "values called"},
    # numpy/random/_pickle.py: __bit_generator_ctor(cls) returns cls() for a class;
    # __generator_ctor / __randomstate_ctor(name, ctor) call ctor(name) (the default ctor is
    # __bit_generator_ctor, which calls a class)
    "numpy.random._pickle.__bit_generator_ctor": {0: "called if a class"},
    "numpy.random._pickle.__generator_ctor": {0: "called if a class", 1: "called"},
    "numpy.random._pickle.__randomstate_ctor": {0: "called if a class", 1: "called"},
    # Cython's generated unpickler: SeedSequence.__new__(type)
    "numpy.random.bit_generator.__pyx_unpickle_SeedSequence": {0: "constructed"},
    # collections.defaultdict(factory): the factory is called on a missing key, after loading
    "collections.defaultdict": {0: "called"},
}

# Loaders that unpickle bytes held in the file: the call is judged by what those bytes hold
# (adapters/pickle_nested.py), not by the name alone. picklescan's own comment on such globals:
# "if this has valid use cases, scan the input bytes instead of flagging the global".
NESTED_LOADERS: dict[str, str] = {
    "torch.storage._load_from_bytes": "pickle.dumps of a torch tensor writes each storage so: "
    "torch.load(BytesIO(b), weights_only=False) of a torch.save file",
}
