-- pg_plpython.sql - the peer of tools/bench/pg.sh: LeNet in PL/Python with PyTorch, written the
-- way people score a table in PostgreSQL today (postgresql-plpython3-15, Debian's python3-torch).
-- The model is built in torch as tools/bench/lenet_torch.py builds it and given the weights of a
-- ddl checkpoint exported by `ddl-ckpt export CKPT lenet.npz` (PyTorch's names and layouts, and the
-- input normalisation the checkpoint carries: input_mean, input_std). The .npz's path is the
-- setting torch_bench.model (postgresql.conf). The model is built and loaded once per backend, on
-- its first row, and kept in GD; each row is then one forward pass of one image, 1 thread.

CREATE EXTENSION IF NOT EXISTS plpython3u;

-- torch_where(): which torch and which Python the server's plpython3u imports
CREATE FUNCTION torch_where() RETURNS text LANGUAGE plpython3u AS $$
import sys
import torch
return "torch %s from %s (python %s)" % (torch.__version__, torch.__file__, sys.version.split()[0])
$$;

-- torch_predict(img): the class with the largest score; img is 784 bytes of raw pixels (1 x 28 x 28)
CREATE FUNCTION torch_predict(img bytea) RETURNS int LANGUAGE plpython3u STRICT AS $$
predict = GD.get("lenet_predict")
if predict is None:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(400, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    path = plpy.execute("SELECT current_setting('torch_bench.model') AS p")[0]["p"]
    z = np.load(path)
    net = LeNet5()
    net.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files if not k.startswith("input_")})
    net.eval()
    mean, std = float(z["input_mean"]), float(z["input_std"])

    def predict(img):
        x = torch.from_numpy(np.frombuffer(img, dtype=np.uint8).astype(np.float32)).view(1, 1, 28, 28)
        with torch.no_grad():
            return int(net((x / 255.0 - mean) / std).argmax(1))

    GD["lenet_predict"] = predict
return predict(img)
$$;
