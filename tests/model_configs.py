"""Small hyperparameters of every registered model, for the suite-wide tests (saving, cross-backend).

Every registered model must have an entry (tests/registry_test.py checks it). The schema is
`tests.testing.small_simulator().schema` unless the entry says otherwise.
"""

SMALL = {
    "din": {"attention_units": (8,), "mlp_units": (16,)},
    "rest": {"model_dim": 8, "num_heads": 2, "encoder_depth": 2, "ffn_dim": 8, "mlp_units": (8,)},
    "deres_p": {"num_layers": 2, "width": 8, "num_heads": 2, "num_blocks": 1},
    "deres_s": {"num_layers": 2, "width": 8, "num_heads": 2, "num_blocks": 2},
    "ctr_transformer": {"num_layers": 2, "width": 8, "num_heads": 2},
    "attnres": {"num_layers": 2, "width": 8, "num_heads": 2, "num_blocks": 2},
    "denseformer": {"num_layers": 2, "width": 8, "num_heads": 2},
    "suan": {"num_layers": 1, "num_heads": 2, "mlp_units": (8,)},
    "lightsuan": {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "window_size": 2, "dilation": 2, "parallel_candidates": 4},
    "fm": {},
    "deepfm": {"mlp_units": (8,)},
    "dcnv2": {"num_cross_layers": 2, "mlp_units": (8,)},
    "autoint": {"num_layers": 1, "num_heads": 2, "head_dim": 4},
    "fibinet": {"mlp_units": (8,)},
    "bst": {"num_heads": 2, "num_layers": 1, "position_dim": 8, "ffn_dim": 8, "mlp_units": (8,)},
    "sasrec": {"width": 8, "num_heads": 2, "num_layers": 1, "mlp_units": (8,)},
    "transformer": {"width": 8, "num_heads": 2, "num_layers": 1, "ffn_dim": 8, "mlp_units": (8,)},
    "llama": {"width": 8, "num_heads": 2, "num_layers": 1, "ffn_dim": 8, "mlp_units": (8,)},
    "stca": {"width": 8, "num_heads": 2, "num_layers": 2, "ffn_dim": 8, "mlp_units": (8,)},
    "hstu": {"num_layers": 2, "num_heads": 2, "attention_dim": 4, "linear_dim": 4, "mlp_units": (8,)},
    "can": {"attention_units": (8,), "micro_mlp_units": (4, 2), "feed_dim": 4, "orders": 2, "mlp_units": (8,)},
    "sim_soft": {"k": 4, "num_heads": 2, "attention_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)},
    "sim_hard": {"k": 4, "num_heads": 2, "attention_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)},
    "eta": {"k": 4, "num_bits": 8, "num_heads": 2, "attention_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)},
    "twin": {"k": 4, "num_heads": 2, "head_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)},
    "mhc": {"num_layers": 1, "width": 8, "num_heads": 2, "expansion_rate": 2, "sinkhorn_iterations": 3},
    "onetrans": {"num_layers": 2, "width": 8, "num_heads": 2, "num_ns_tokens": 2, "mlp_units": (8,)},
    "tokenmixer_large": {"num_layers": 2, "width": 8, "num_heads": 2, "expansion": 1, "attention_units": (8,),
                         "mlp_units": (8,)},
    "unimixer": {"num_layers": 1, "width": 8, "block_size": 4, "expansion": 1, "attention_units": (8,), "mlp_units": (8,)},
}
