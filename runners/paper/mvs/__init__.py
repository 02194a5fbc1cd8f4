"""The MVS paper (Ibragimov and Gusev, NeurIPS 2019): the row samplers compared side by side
(:mod:`.comparison`), their outputs (:mod:`.report`) and the paper's Tables 2-4 (:mod:`.tables`)."""
