"""The new-feature utility paper (Koepke and Bilenko, ICML 2012): its Section 5 experiments
(:mod:`.experiments`), their figures and claims (:mod:`.report`), and the test on a runner's
config with its MLflow run (:mod:`.held_back`, ``python -m runners.feature_utility``)."""
