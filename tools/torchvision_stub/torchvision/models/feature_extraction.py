def get_graph_node_names(*a, **k):
    raise RuntimeError("stub")


def create_feature_extractor(*a, **k):
    raise RuntimeError("stub")
