"""Data only: the published lists of dangerous pickle globals and ours (the vetted set: vetted.py).

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
# unless it is in the vetted set, vetted.py).
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

# The vetted set (what a loader may call or construct) is data of its own: vetted.py.

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
# "values called": the values of that mapping are called later (hooks);
# "state set": setattr(obj, key, value) per key (torch._utils._set_obj_state): a __class__ key
# makes the object an instance of that class (constructed), a planted method is called later;
# "<method> read": an object or class of the file there has that method run (dict(x): keys).
CALLS_ARGUMENT: dict[str, dict[int, str]] = {
    # copyreg.py: base.__new__(cls, state); base.__init__(obj, state) unless base is object
    "copyreg._reconstructor": {0: "constructed", 1: "called"},
    "copyreg._reconstruct": {0: "constructed", 1: "called"},
    "copyreg.__newobj__": {0: "constructed"},  # cls.__new__(cls, *args)
    "copyreg.__newobj_ex__": {0: "constructed"},  # cls.__new__(cls, *args, **kwargs)
    # torch/_tensor.py: ret = func(*args); ret.as_subclass(new_type); new_type's __setstate__
    "torch._tensor._rebuild_from_type_v2": {0: "called", 1: "constructed", 3: "state set"},
    "torch._tensor._rebuild_from_type": {0: "called", 1: "constructed"},
    # torch/_utils.py: Tensor._make_wrapper_subclass(cls, ...); param._backward_hooks = hooks
    "torch._utils._rebuild_wrapper_subclass": {0: "constructed"},
    "torch._utils._rebuild_tensor_v2": {5: "values called"},  # tensor._backward_hooks
    "torch._utils._rebuild_tensor_v3": {5: "values called"},
    "torch._utils._rebuild_qtensor": {6: "values called"},
    # numpy/_core/src/multiarray: _reconstruct(subtype, shape, dtype) makes a `subtype` array
    "numpy.core.multiarray._reconstruct": {0: "constructed"},
    "numpy._core.multiarray._reconstruct": {0: "constructed"},
    # ... and torch._utils._set_obj_state(param, state): setattr per key (__class__ included)
    "torch._utils._rebuild_parameter_with_state": {2: "values called", 3: "state set"},
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
    "collections.defaultdict": {0: "called", 1: "keys read"},  # dict.__init__: x.keys()
}

# Loaders that unpickle bytes held in the file: the call is judged by what those bytes hold
# (adapters/pickle_nested.py), not by the name alone. picklescan's own comment on such globals:
# "if this has valid use cases, scan the input bytes instead of flagging the global".
NESTED_LOADERS: dict[str, str] = {
    "torch.storage._load_from_bytes": "pickle.dumps of a torch tensor writes each storage so: "
    "torch.load(BytesIO(b), weights_only=False) of a torch.save file",
}
