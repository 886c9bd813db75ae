"""Security: what a real loader would run from a file, examined without running anything.

``restricted_pickle`` (the unpickler that imports and calls nothing), ``verdicts`` + ``lists``
(a global's verdict from how a loader would use it), ``nested`` (pickles inside pickles),
``findings`` (verdicts as checkpoint findings), ``joblib_stream``, ``scan`` (the verdict per
file) and ``policy`` (what every verb refuses).
"""
