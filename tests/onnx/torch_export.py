"""torch_export.py DIR - a small CNN exported by PyTorch's own torch.onnx.export (opsets 13 and 17)
as DIR/torch13.onnx and DIR/torch17.onnx, for tests/test_onnx_import.sh when python3-torch is
installed (make bench installs it; make test does not): the layers of make_models.py, written the
way PyTorch writes them (its avg_pool2d comes with a Pad of zeros, its Linear as Gemm)."""
import torch, torch.nn as nn, numpy as np, sys
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(3, 8, 3, padding=1); s.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        s.up = nn.ConvTranspose2d(8, 4, 2, stride=2); s.head = nn.Conv2d(12, 8, 1)
        s.fc1 = nn.Linear(8, 16); s.drop = nn.Dropout(0.2); s.fc2 = nn.Linear(16, 5)
    def forward(s, x):
        r1 = torch.relu(s.conv1(x)); p1 = nn.functional.max_pool2d(r1, 2)
        r = torch.relu(s.conv2(p1)) + p1
        c = torch.cat([r1, s.up(r)], 1)
        a = nn.functional.avg_pool2d(s.head(c), 2)
        g = nn.functional.adaptive_avg_pool2d(a, 1)
        f = torch.flatten(g, 1)
        return s.fc2(s.drop(torch.relu(s.fc1(f))))
m = Net().eval()
x = torch.rand(4, 3, 16, 16) * 255
out = sys.argv[1]
for opset in (13, 17):
    torch.onnx.export(m, x, "%s/torch%d.onnx" % (out, opset), input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}}, opset_version=opset)

