from transformers import PretrainedConfig

from .helper import VALUE  # noqa: F401


class XConfig(PretrainedConfig):
    model_type = "xrt"
