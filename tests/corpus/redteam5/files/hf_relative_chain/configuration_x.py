from transformers import PretrainedConfig
from .util_a import A


class XConfig(PretrainedConfig):
    model_type = "xrt"
