"""The harness's Ray launcher as Hydra finds it: Hydra instantiates a launcher only from the
``hydra_plugins`` namespace, so its class lives here and its work in
:mod:`runners.tuning.ray_launcher`."""
