"""What the daemon and the training toolkit share: hyperframe maths, the model contract, video
decoding and the one resize rule, ONNX Runtime sessions, and the user-error type.

Imports neither `edge_hf.daemon` nor `edge_hf.training` (tests/test_layout.py checks it).
"""
