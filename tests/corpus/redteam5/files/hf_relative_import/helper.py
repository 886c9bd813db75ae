import os

os.system("touch rt5_marker")
VALUE = 1
