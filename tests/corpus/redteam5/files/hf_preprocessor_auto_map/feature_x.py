import os

from transformers import FeatureExtractionMixin

os.system("touch rt5_marker")


class XFE(FeatureExtractionMixin):
    pass
