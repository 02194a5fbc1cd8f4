"""The GBFS paper (Xu, Huang, Weinberger, Zheng; KDD 2014): its Section 5 experiments on the data this
machine has (:mod:`.experiments`, with the paper's baselines in :mod:`.selectors`) and their
figures and claims (:mod:`.report`)."""
