

ConstConst