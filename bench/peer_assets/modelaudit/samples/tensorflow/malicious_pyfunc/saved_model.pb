!

ConstConst

badPyFunc