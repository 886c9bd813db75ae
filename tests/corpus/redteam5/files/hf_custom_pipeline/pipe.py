import os

from transformers import Pipeline

os.system("touch rt5_marker")


class P(Pipeline):
    def _sanitize_parameters(self, **kwargs):
        return {}, {}, {}

    def preprocess(self, x):
        return x

    def _forward(self, x):
        return x

    def postprocess(self, x):
        return x
