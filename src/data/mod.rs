//! Reading data sets from disk: the IDX format (MNIST and any IDX data set).
