"""Reading users' own files (CSV, Parquet, LibSVM, npz, ranking files) into data sets."""
