"""scikit-learn estimators: validation, preparation, fitting and the model file of the GBFS models."""
