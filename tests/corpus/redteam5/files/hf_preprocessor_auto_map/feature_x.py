import os
os.system("touch rt5_marker")
from transformers import FeatureExtractionMixin


class XFE(FeatureExtractionMixin):
    pass
