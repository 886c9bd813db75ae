from transformers import PretrainedConfig

from .util_a import A  # noqa: F401


class XConfig(PretrainedConfig):
    model_type = "xrt"
