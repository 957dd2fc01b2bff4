"""The toolkit that makes models: synthetic clips, datasets, inflated backbones, training,
evaluation and the controls for time (diagnose), ONNX export and model cards.

Never imports `edge_hf.daemon`: a model reaches the daemon only as an ONNX file with its contract.
"""
