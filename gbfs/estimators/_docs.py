"""The parameter documentation shared by :class:`~gbfs.GBFSClassifier` and :class:`~gbfs.GBFSRegressor`."""

PARAM_DOC = """
    Parameters
    ----------
    method : {"agbm", "gbfs", "gtgbm", "topk"}, default="agbm"
        Split criterion.  ``"gbfs"``: maximise ``gain - mu * c_j * 1{j unused}``
        (Eq. 1 of the GT-GBM paper, Eq. 14 of the GBFS paper); ``"agbm"``: maximise
        ``gain / SSE_root - mu * c_j * 1{j unused}`` where SSE_root is the SSE of the
        residuals at the tree's root (A-GBM, Section 2 of the GT-GBM paper), so ``mu``
        lies in [0, 1] whatever the scale of the target.  ``"gtgbm"``: the A-GBM
        criterion over the used features and the candidates found by group tests
        on random feature subsets (GT-GBM, Algorithm 2; see :mod:`gbfs.criteria.group_testing`).
        ``"topk"``: GBDT-topK (GT-GBM paper, Section 5.1) in this booster: an unpenalised fit
        on all features ranks them by ``importance_type`` (over every tree it grew, also those
        early stopping drops), then the top ``max_features`` are refitted (always refitted;
        ``mu``, costs and bags do not apply).
        With ``criterion="newton"`` the A-GBM divisor is the Newton counterpart of SSE_root,
        ``sum w g^2/h - G^2/(H + lambda)`` over the root's rows, the largest gain any split of
        the tree can reach (:func:`gbfs.booster.normaliser.gain_normaliser`), so normalised gains stay in
        [0, 1] at every node of every tree and are invariant to the scale of ``y``.
    mu : float, default=0.01
        Penalty for using a new feature (or bag); 0 gives plain gradient boosting.
    feature_costs : array-like of shape (n_features,), default=None
        Per-feature multipliers ``c_j >= 0`` of ``mu`` (default all 1).
    feature_bags : array-like of int, shape (n_features,), default=None
        Bag id of each feature: once any feature of a bag is used, the whole bag is
        free (GBFS paper, Section 4.2).  A bag's cost is that of the feature used.
    max_features : int or None, default=None
        Hard budget: once this many features are used (bags, when ``feature_bags`` is given --
        a bag is what ``mu`` prices), no split may use a new one; ``mu`` still prices the first
        uses before that.  Never exceeded.  Required by ``method="topk"`` (its K) unless
        ``max_cost`` is given.
    max_cost : float or None, default=None
        Budget in cost units: the ``feature_costs`` of the used features (of the feature that
        opened each used bag, with ``feature_bags``) sum to at most this.  A feature whose first
        use would exceed what is left is priced at ``+inf``; ``mu`` still prices the affordable
        ones.  Never exceeded; with unit costs ``max_cost=K`` is ``max_features=K``.  With
        ``method="topk"``: the features are taken in order of importance while they fit.
    refit : bool, default=False
        Relaxed refit (:mod:`gbfs.criteria.refit`): after the penalised fit has selected its features, grow
        an unpenalised booster (Newton gain and leaves, the same tree settings and sampler, early
        stopping on the eval set) on the selected features only; it is the fitted model.  The
        selection fit ends as soon as its budget is full.  ``False`` keeps the papers' model.
    selection_patience : int or None, default=None
        Refit mode: end the selection fit once no new feature has been used for this many trees
        (like early stopping, for the selection); None: only the budget and early stopping end it.
    anneal_factor : float >= 1, default=1.0
        Annealed price (:class:`gbfs.criteria.penalty.FeatureUsage`): the first round prices a
        first use at ``anneal_factor * mu``, lowered geometrically to ``mu`` over
        ``anneal_rounds`` rounds, so the first trees admit only features whose gain pays the dearer
        price.  1.0 (the papers' constant price) turns it off.  On digits, Isolet and Madelon
        (seeds 0-3), A-GBM with ``max_features=K``, relaxed refit and ``anneal_factor=4`` selected
        sets that tested better than the constant price's and than GBDT-topK by gain at K = 5, 10
        and 20 (``docs/benchmarks.md``).
    anneal_rounds : int, default=20
        Rounds over which an annealed price falls to ``mu``.
    importance_type : {"gain", "split"}, default="gain"
        What ``feature_importances_`` holds (LightGBM's definitions): the total unpenalised gain of
        the splits on each feature, or their number; also GBDT-topK's ranking.
    n_estimators : int, default=100
    learning_rate : float in (0, 100], default=0.1
        Shrinkage epsilon of Algorithm 3.  A fit whose scores outgrow float64 (a step so large
        that every tree overshoots its residuals) stops with a ValueError naming it; no model
        with non-finite scores is ever returned.
    max_depth : int or None, default=None
    max_leaves : int or None, default=31
    min_samples_leaf : int, default=20
    leaf_count : {"auto", "rows", "hessian"}, default="auto"
        How ``min_samples_leaf`` counts a child's rows: exactly (``"rows"``), or as LightGBM's
        ``min_data_in_leaf`` does, from its hessians (``"hessian"``: each histogram bin counts
        ``round(H_bin * n_node / H_node)`` rows, so rows the model is already sure of count for
        less).  ``"auto"``: ``"hessian"`` for more than two classes, ``"rows"`` otherwise.  Only
        matters with ``criterion="newton"`` or a row sampler's weights (unit hessians count rows).
    min_node_fraction : float in (0, 1) or None, default=None
        The papers' alpha: a node with fewer than ``alpha * n`` rows is not split.
    criterion : {"sse", "newton"}, default="sse"
        ``"sse"``: first-order SSE reduction of the residuals (the papers' Eq. 1);
        ``"newton"``: hessian-weighted gain as in LightGBM (not a paper method).
    leaf_estimate : {"mean", "newton"}, default="mean"
        Leaf value before shrinkage: mean residual (the papers' least-squares fit) or
        ``sum r / (sum h + reg_lambda)`` (one Newton step, as LightGBM).
    reg_lambda : float, default=0.0
        L2 term added to hessian sums of the Newton forms.
    min_child_weight : float, default=1e-3
        Minimum sum of the second channel (weights or hessians) in a child.
    min_split_gain : float, default=0.0
        A split must gain more than this (in the criterion's unpenalised gain units, before any
        normalisation or penalty), LightGBM's ``min_split_gain``; 0: any gain above roundoff (a
        ten-billionth of the tree's largest possible gain, so a pure node is never split).
    split_search : {"histogram", "exact"}, default="histogram"
        How a node's best split is found. ``"histogram"``: over the ``max_bins`` bins of each feature
        (LightGBM's way, and the fast one). ``"exact"``: over every cut between two distinct raw
        values, by sorting, as XGBoost's ``tree_method="exact"`` and the papers' CART search (the
        cost model of the GT-GBM paper, Table 1): presorted lists for a search over every feature,
        a sort per node for GT-GBM's few features.  Dense numeric input only, one tree per round
        (no multiclass, multitask or Dask fits); memory about ``12 * n_rows * n_features`` bytes.
    max_bins : int, default=255
        Value bins per feature (NaN has an extra bin).
    min_data_in_bin : int, default=3
        Fewest training rows of a value bin, as LightGBM's ``min_data_in_bin`` (same default): a
        column with few distinct values merges its rare ones with their neighbours, one with many
        gets at most ``n_rows // min_data_in_bin`` quantile bins.  On tiny data (a few dozen rows)
        this keeps the first split from isolating single rows, after which later trees learn
        nothing; 1 gives every distinct value of a narrow column its own bin.
    bin_subsample : int or None, default=200000
        Rows used to find bin edges.
    early_stopping_rounds : int or None, default=None
        Stop when the first eval set's loss has not improved for this many trees;
        the model keeps the trees up to the best iteration.  Needs ``eval_set``.
    n_target_features : int or None, default=None
        GT-GBM's s, the number of important features sought per split (Algorithm 2);
        None: ``min(10, n_features)``.  A value above the number of features is refused.
    delta : float in (0, 1), default=0.1
        GT-GBM's failure probability of Theorem 4.1.
    n_subsets : int or None, default=None
        GT-GBM's number of random feature subsets p; None: ``ceil(e * s * ln(s / delta))``
        (Theorem 4.1), or 1 when s = 1.
    subset_size : int or None, default=None
        Features per subset; None: ``ceil(n_features / s)`` (all features when s = 1).
    group_test_scope : {"tree", "node"}, default="tree"
        ``"tree"``: group tests once per tree, at the root; every node of that tree then
        searches the used features and that candidate set with the histogram subtraction
        trick (5-13x faster than A-GBM at the Gisette shape, where node scope is about 1x;
        the same test AUC in the GT-GBM benchmark and the best selector family of the
        selection benchmark).  ``"node"``: group tests at every node, Algorithm 2 as
        written (the paper's experiments; the harness's ``method=gtgbm``).
    group_test_rows : int or None, default=None
        GT-GBM: a node with more rows runs its group tests on a seeded uniform sample
        of this many rows (the candidates are still evaluated exactly on all rows).
        None: all rows, as in the paper.
    max_precompute_bytes : int, default=4 GiB
        Memory budget of GT-GBM's precompute (float32 standardised copy + prefix sums);
        a larger plan is refused with the largest settings that fit.
    sampler : {None, "sgb", "goss", "mvs", "mvs_adaptive"}, default=None
        Row sampling per tree (MVS paper; see :mod:`gbfs.sampling.samplers`): None uses every row;
        ``"sgb"`` a uniform ``subsample`` without replacement; ``"goss"`` the ``top_rate`` rows
        with the largest ``|g|`` plus ``other_rate`` of all rows drawn from the rest, weighted
        ``(1 - top_rate) / other_rate``; ``"mvs"`` minimal variance sampling (Theorem 2,
        Algorithms 1-2) with ``p_i = min(1, sqrt(g_i^2 + mvs_lambda h_i^2) / mu)``;
        ``"mvs_adaptive"`` the same with lambda re-set every iteration.  The sampled rows and
        their weights ``1/p_i`` are what the histograms, the split search, the root SSE of
        A-GBM and the leaf values see; every row's score is updated by the tree.
    subsample, top_rate, other_rate, mvs_lambda : float or None, default=None
        Parameters of the sampler (None: 0.5, 0.2, 0.1, 0.1); an argument the chosen sampler
        does not use must stay None.
    goss_style : {"paper", "lightgbm"}, default="paper"
        GOSS only: ``"lightgbm"`` ranks rows by ``|g h|`` and samples nothing during the first
        ``1 / learning_rate`` iterations, as LightGBM does.
    categorical_features : "auto", None, list of int or str, or array of bool, default="auto"
        Columns split on sets of categories (:mod:`gbfs.booster.kernels.categorical`) rather than thresholds.
        ``"auto"``: a DataFrame's pandas ``category`` columns; a list names them by index or
        column name (text columns listed are categorised, numeric ones must hold non-negative
        integer codes), or a boolean mask.  The model keeps the training categories
        (``categories_``) and maps a frame's values to them at prediction; an unseen category
        is predicted like a missing value.  A categorical feature is one feature for ``mu``,
        costs, bags and budgets, whatever its number of categories.
    cat_smooth, cat_l2 : float, default=10.0
        LightGBM's categorical settings: the categories ordered by ``G_c / (H_c + cat_smooth)``
        (those with at least ``cat_smooth`` rows), and ``cat_l2`` added to ``reg_lambda`` in the
        children's terms of a many-vs-many split's gain.
    max_cat_threshold : int, default=32
        Most categories on the left of a many-vs-many split.
    min_data_per_group : int, default=100
        Rows between two scored prefixes of the ordering, and the fewest rows on the right.
    max_cat_to_onehot : int, default=4
        A feature with at most this many categories is split one-vs-rest.
    train_metrics : {"loss", "all", "none"}, default="loss"
        What ``history_`` records of the training rows after every tree: their loss (what a
        progress bar shows without an eval set), ``"all"`` of the eval sets' metrics too (AUC,
        RMSE, accuracy, NDCG@k, ...: on 100 000 rows these cost as much as a small tree), or
        ``"none"``.  The eval sets always record every metric.
    random_state : int, RandomState instance or None, default=None
        Seed of every random choice (bin subsample, GT-GBM's subsets, row samples); same seed,
        same model.
    n_threads : int or None, default=None
        Threads of the numba kernels (None: numba's default, all cores).  A run-time setting, not
        part of the model: ``fit`` refuses more threads than numba was started with
        (``NUMBA_NUM_THREADS``); prediction uses at most that many, so a model fitted or saved on
        a larger machine predicts anywhere (with a warning, unless the value came from the model
        file, whose thread count is ignored as LightGBM ignores it).
    verbose : bool, default=False
        Show a progress bar on stderr over the trees of each fit (the selection fit, then the
        refit), with the latest validation loss (training loss without an eval set): the bar of
        :func:`gbfs.booster.callbacks.progress_bar`.  Not part of the model.
"""

MULTITASK_PARAM_DOC = PARAM_DOC.replace(
    """    mu : float, default=0.01
        Penalty for using a new feature (or bag); 0 gives plain gradient boosting.
""", """    mu : float, default=0.01
        ``mu_G`` of Eq. 2 (GT-GBM paper): the penalty of a feature (or bag) no task uses yet.
        0 selects each task's features independently.
    mu_task : float, default=0.01
        ``mu_t`` of Eq. 2: the penalty of a feature the task's own trees do not use yet (charged
        on top of ``mu`` for a feature no task uses).  0 gives GroupSparse: one feature set for
        all tasks.  With ``method="agbm"``/``"gtgbm"``, ``mu + mu_task <= 1``.
""")
