from transformers import PretrainedConfig
from .helper import VALUE


class XConfig(PretrainedConfig):
    model_type = "xrt"
