import os

os.system("touch rt5_marker")
B = 1
