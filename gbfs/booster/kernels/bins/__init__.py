"""The binning kernels behind :class:`gbfs.booster.binning.BinMapper`: a column's edges and bin means
(:mod:`.edges`) and raw values to bins (:mod:`.lookup`)."""
