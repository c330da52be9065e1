#!/bin/sh
# make bench: long runs and peer comparisons, never part of make test.
#   1. LeNet, one epoch, one process, one thread: ddl against PyTorch 1.13 (same model, data,
#      batch and recipe), alternated REPEAT times; medians and their ratio.
#   Each PyTorch peer also runs in channels_last and with bfloat16 autocast (torch_modes.py), and
#   ddl is reported against the fastest setting too (LeNet, U-Net, cnn, ResNet-18).
#   1b. U-Net (unet defaults: 64x64, batch 32, depth 3, width 8, Adam), SCENES training scenes,
#      one process, one thread: ddl against tools/bench/unet_torch.py, alternated REPEAT times.
#   2. Scaling: 2 ranks over shm against 1 rank (one epoch each), LeNet, then U-Net (SCENES scenes);
#      LeNet's also against 2 processes that meet after every step and exchange nothing (lockstep.c):
#      what any synchronous training can get from these two vCPUs.
#   2b. --threads 2 in one process, LeNet and U-Net, against 1 thread and PyTorch's 2 (threads.sh).
#      Before each round of 2 and 2b, tools/bench/cores.c measures what both cores give at once
#      against one alone (a neighbour on a shared host can halve a core): the ceiling of the ratios.
#   2c. LeNet's step op by op, microseconds at 1 and 2 threads (lenet_ops.c; BENCH_ONLY=ops), and
#       single kernels alone: LeNet's convolutions, U-Net's GroupNorm + ReLU fused and not (kernels.c).
#   2d. Image loading: a folder of 3000 JPEG photos decoded and resized, 1 and 2 threads, against
#       PIL (load.sh, load.c).
#   2e. Layer graphs: LeNet and U-Net as graphs against their plugins, ddl-train --arch lenet
#       against lenet, and --arch cnn on 64x64 RGB photos against PyTorch (graph.sh, graph.c).
#   2f. ResNet-18 imported from PyTorch's ONNX export (BatchNorm in training mode) against PyTorch,
#       and BatchNorm against the conv before it (resnet.sh, resnet_torch.py, bn.c).
#   2g. torchvision's MobileNetV3-Small, EfficientNet-B0, ShuffleNetV2 and DenseNet-121 trained
#       from their ONNX exports against PyTorch (zoo.sh, zoo_torch.py; BENCH_ONLY=zoo).
#   3. ddl-bench allreduce for every transport at 256 KiB and 8 MiB, and MPI_Allreduce (busbw.sh).
#   4. What frame MACs cost, and zmq against tcp and against libzmq alone (mac.sh, zmq_floor.c).
#   5. ddl-serve under wrk: :predict with one LeNet instance per request (serve.sh).
#   5a. ddl-serve's dynamic batching: the cnn preset at 64x64, PNG bodies, with and without
#       --max-batch (serve_batch.sh; SERVE_BATCH_THREADS, SERVE_MAX_BATCH, SERVE_BATCH_TIMEOUT_US).
#   5b. LeNet in PostgreSQL: ddl_predict over 50,000 rows in one backend against the same model in
#       PL/Python with PyTorch, called per row (pg.sh, pg_plpython.sql; needs root or PostgreSQL's rights).
#   5c. PostgreSQL, many rows per call: ddl_predict_batch against ddl_predict over 50,000 rows
#       (LeNet), ddl_segment_batch against ddl_segment (U-Net), and the memory a backend holds per
#       model (pg_batch.sh; BATCH_SIZES, ARRAY_ROWS, UNET_ROWS).
#   6. Two hosts (network namespaces) joined by a 1 Gbit/s link: LeNet with DDL_COMPRESS=none, bf16
#      and fp16, against 2 ranks on loopback (twohost.sh; needs root).
#   6b. Ring against parameter server (DDL_ALGO=ps): all-reduce of LeNet's gradient size and 8 MiB on
#      4 hosts at 1 Gbit/s (htb), one rank each (ps.sh; needs root).
#   6c. The all-reduce against the wire: ddl over tcp at 8 and 32 MiB on 2 and 4 hosts, links of
#      1 and 10 Gbit/s (htb), against the link's rate, iperf3 --bidir and Open MPI's MPI_Allreduce
#      (wire.sh; needs root; WIRE_RATES and WIRE_HOSTS choose).
#   7. What DDL_COMPRESS costs in accuracy: LeNet, 2 ranks over tcp, 5 epochs, seeds 1, 2 and 42,
#      test accuracy with none, bf16 and fp16 (the means over the seeds).
# Environment: REPEAT (default 3), EPOCHS (default 1),
#   8. Elastic training: its cost with no failure (LeNet, 2 ranks shm and 4 tcp, --elastic against
#      plain) and the state a replacement receives (U-Net, Adam) against an all-gather of the same
#      bytes (elastic.sh).
#   9. Trains as PyTorch trains: PyTorch-written networks exported in training mode, their outputs
#      and 20 per-step losses against PyTorch (torch_trains.sh); 9b. the issue's network's test
#      accuracy on a five-class folder against PyTorch's, over seeds (acc5.sh; BENCH_ONLY=acc5).
#   2g. --precision bf16: the cnn preset in float32, bfloat16 and PyTorch's bfloat16 autocast, and
#       LeNet's test accuracy in float32 and bfloat16 (bf16.sh).
#   2h. The AMX bfloat16 path: the product alone and the cnn preset on AMX, AVX512-BF16, float32 and
#       PyTorch's autocast (amx.sh; "skipped: no AMX" on a CPU without it).
# BENCH_ONLY=lenet|unet|scaling|threads|ops|load|graph|bf16|resnet|allreduce|mac|serve|serve_batch|pg|pg_batch|twohost|ps|wire|halving|hier|compress|elastic|torchtrain|acc5|winograd|amx|zoo,
# SCENES (default 1024),
# SERVE_SECONDS (default 30), SERVE_CONNS (default 64).
# Every section adds its figures to one table (tools/bench/lib.sh), printed at the end: each figure,
# its peer, the ratio and issue 12's target, and the peak RSS of ddl's and the peer's processes.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
EPOCHS=${EPOCHS:-1}
ONLY=${BENCH_ONLY:-}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "$here/lib.sh"
mkdir -p "$(dirname "$BENCH_RESULTS")" && : > "$BENCH_RESULTS" || exit 1
if [ ! -x /usr/bin/time ] || ! command -v iperf3 > /dev/null 2>&1 || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    DDL_BENCH_DEPS=1 sh tools/install-deps.sh || exit 1
fi
rss_d=/tmp/ddl-bench-rss-ddl; rss_t=/tmp/ddl-bench-rss-torch
# What the PyTorch peers make alone, one thread (images/s, lowest and highest seen), on vCPUs of
# 215 FMA GFLOP/s (cores.c): scaled by what this machine's cores give now, since machines of this
# kind differ (some give half that, with no other load and no steal). A run whose peer falls
# outside is repeated (up to 3 more runs) and not reported: the machine is busy.
FMA_REF=215
FMA_NOW=$(bench_tool cores > /dev/null && "$(bench_tool cores)" 1 | sed -n 's/.* alone=\([0-9.]*\),\([0-9.]*\) .*/\1 \2/p' |
    awk '{ printf "%.0f", ($1 + $2) / 2 }')
FMA_NOW=${FMA_NOW:-$FMA_REF}
scale_band() { awk -v lo="$1" -v hi="$2" -v f="$FMA_NOW" -v r="$FMA_REF" 'BEGIN { printf "%.0f %.0f", lo * f / r, hi * f / r }'; }
echo "== machine: $FMA_NOW FMA GFLOP/s per vCPU (cores.c; the peers' bands are for $FMA_REF, scaled to this)"
LENET_PEER_BAND=${LENET_PEER_BAND:-$(scale_band 8000 16000)}
UNET_PEER_BAND=${UNET_PEER_BAND:-$(scale_band 200 320)}
export CNN_PEER_BAND=${CNN_PEER_BAND:-$(scale_band 200 340)}

if [ -z "$ONLY" ] || [ "$ONLY" = lenet ]; then
    echo "== LeNet, $EPOCHS epoch(s), batch 64, SGD lr 0.01 momentum 0.9, 1 process, 1 thread; $REPEAT alternated runs"
    : > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt; : > /tmp/ddl-bench-modes.txt
    i=0 tries=0
    while [ $i -lt "$REPEAT" ] && [ $tries -lt $((REPEAT + 3)) ]; do
        tries=$((tries + 1))
        d=$(peak_rss $rss_d "$BUILD/bin/lenet" --epochs "$EPOCHS" --threads 1 --quiet --data "$DATA" | field images_per_sec)
        t=$(peer_modes /tmp/ddl-bench-modes.txt peak_rss $rss_t /usr/bin/python3 "$here/lenet_torch.py" --epochs "$EPOCHS" --threads 1 --data "$DATA")
        echo "   run $tries: ddl $d images/s, pytorch $t images/s"
        peer_ok "PyTorch's LeNet" "$t" $LENET_PEER_BAND || continue
        echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
        i=$((i + 1))
    done
    d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
    echo "lenet_1thread: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(ratio "$d" "$t")"
    record "LeNet training, images/s, 1 thread" "$d" "PyTorch 1.13" "$t" "$(ratio "$d" "$t")" ">= 2.5" "$(cat $rss_d)" "$(cat $rss_t)"
    record_best "LeNet training, images/s, 1 thread" "$d" /tmp/ddl-bench-modes.txt "-"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = unet ]; then
    SCENES=${SCENES:-1024}
    echo "== U-Net, $SCENES scenes 64x64, batch 32, depth 3, width 8, Adam, 1 process, 1 thread; $REPEAT alternated runs"
    : > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt; : > /tmp/ddl-bench-modes.txt
    i=0 tries=0
    while [ $i -lt "$REPEAT" ] && [ $tries -lt $((REPEAT + 3)) ]; do
        tries=$((tries + 1))
        d=$(peak_rss $rss_d "$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 --threads 1 --quiet --data "$DATA" | field images_per_sec)
        t=$(peer_modes /tmp/ddl-bench-modes.txt peak_rss $rss_t /usr/bin/python3 "$here/unet_torch.py" --scenes "$SCENES" --threads 1)
        echo "   run $tries: ddl $d images/s, pytorch $t images/s"
        peer_ok "PyTorch's U-Net" "$t" $UNET_PEER_BAND || continue
        echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
        i=$((i + 1))
    done
    d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
    echo "unet_1thread: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(ratio "$d" "$t")"
    record "U-Net training, images/s, 1 thread" "$d" "PyTorch 1.13" "$t" "$(ratio "$d" "$t")" ">= 1.5" "$(cat $rss_d)" "$(cat $rss_t)"
    record_best "U-Net training, images/s, 1 thread" "$d" /tmp/ddl-bench-modes.txt "-"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = scaling ]; then
    echo "== scaling: LeNet $EPOCHS epoch(s), global batch 64, 1 rank against 2 ranks over shm (1 thread each),"
    echo "   and 2 lone 1-rank processes at once with batch 32 each (no exchange: the cores' own ceiling),"
    echo "   and LeNet's step in 2 processes meeting after every step, exchanging nothing (lockstep.c); $REPEAT runs"
    : > /tmp/ddl-bench-1.txt; : > /tmp/ddl-bench-2.txt; : > /tmp/ddl-bench-cores.txt; : > /tmp/ddl-bench-pair.txt
    : > /tmp/ddl-bench-lockstep.txt
    i=0
    while [ $i -lt "$REPEAT" ]; do
        cores_probe /tmp/ddl-bench-cores.txt
        "$BUILD/bin/lenet" --epochs "$EPOCHS" --quiet --data "$DATA" | field images_per_sec >> /tmp/ddl-bench-1.txt
        peak_rss $rss_d "$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/lenet" --epochs "$EPOCHS" --quiet --data "$DATA" | field images_per_sec >> /tmp/ddl-bench-2.txt
        pair_rate "$BUILD/bin/lenet" --epochs "$EPOCHS" --batch 32 --quiet --data "$DATA" >> /tmp/ddl-bench-pair.txt
        lockstep_probe /tmp/ddl-bench-lockstep.txt
        i=$((i + 1))
    done
    one=$(median < /tmp/ddl-bench-1.txt); two=$(median < /tmp/ddl-bench-2.txt); lone=$(median < /tmp/ddl-bench-pair.txt)
    echo "scaling: world1_images_per_sec=$one world2_images_per_sec=$two efficiency=$(awk "BEGIN {printf \"%.2f\", $two / (2 * $one)}") lone_pair_images_per_sec=$lone lone_pair_vs_1=$(ratio "$lone" "$one")"
    record "LeNet, 2 ranks over shm, images/s" "$two" "ddl, 1 rank" "$one" "$(ratio "$two" "$one")" ">= 1.95" "$(cat $rss_d)" "-"
    record "LeNet, 2 ranks over shm, images/s" "$two" "2 lone processes at once, batch 32 each (the cores' ceiling: $(ratio "$lone" "$one")x 1 rank)" "$lone" "$(ratio "$two" "$lone")" "-" "-" "-"
    lockstep_record "LeNet, 2 ranks over shm, images/s" "$two" /tmp/ddl-bench-lockstep.txt
    SCENES=${SCENES:-1024}
    echo "== scaling: U-Net, $SCENES scenes, batch 32, 1 rank against 2 ranks over shm (1 thread each),"
    echo "   and 2 lone 1-rank processes at once with batch 16 each; $REPEAT runs"
    : > /tmp/ddl-bench-1.txt; : > /tmp/ddl-bench-2.txt; : > /tmp/ddl-bench-pair.txt
    i=0
    while [ $i -lt "$REPEAT" ]; do
        cores_probe /tmp/ddl-bench-cores.txt
        "$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 --quiet --data "$DATA" |
            field images_per_sec >> /tmp/ddl-bench-1.txt
        peak_rss $rss_d "$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 \
            --quiet --data "$DATA" | field images_per_sec >> /tmp/ddl-bench-2.txt
        pair_rate "$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 --batch 16 --quiet --data "$DATA" \
            >> /tmp/ddl-bench-pair.txt
        i=$((i + 1))
    done
    one=$(median < /tmp/ddl-bench-1.txt); two=$(median < /tmp/ddl-bench-2.txt); lone=$(median < /tmp/ddl-bench-pair.txt)
    echo "scaling: unet world1_images_per_sec=$one world2_images_per_sec=$two efficiency=$(awk "BEGIN {printf \"%.2f\", $two / (2 * $one)}") lone_pair_images_per_sec=$lone lone_pair_vs_1=$(ratio "$lone" "$one")"
    record "U-Net, 2 ranks over shm, images/s" "$two" "ddl, 1 rank" "$one" "$(ratio "$two" "$one")" ">= 1.95" "$(cat $rss_d)" "-"
    record "U-Net, 2 ranks over shm, images/s" "$two" "2 lone processes at once, batch 16 each (the cores' ceiling: $(ratio "$lone" "$one")x 1 rank)" "$lone" "$(ratio "$two" "$lone")" "-" "-" "-"
    cores_record "machine during the scaling runs" /tmp/ddl-bench-cores.txt
fi

if [ -z "$ONLY" ] || [ "$ONLY" = threads ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" EPOCHS="$EPOCHS" sh "$here/threads.sh" # ddl 2 threads, 1 thread, PyTorch 2
fi

if [ -z "$ONLY" ] || [ "$ONLY" = ops ]; then
    echo "== LeNet's step op by op (tools/bench/lenet_ops.c), 1 and 2 threads; single kernels (kernels.c)"
    ops=$(ddl_tool lenet_ops) && kernels=$(ddl_tool kernels -lm) &&
        "$ops" --threads 1 && "$ops" --threads 2 && "$kernels"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = load ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/load.sh" # JPEG folder decode + resize, against PIL
fi

if [ -z "$ONLY" ] || [ "$ONLY" = graph ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/graph.sh" # layer graphs against the plugins and PyTorch
fi

if [ -z "$ONLY" ] || [ "$ONLY" = bf16 ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/bf16.sh" # --precision bf16 against float32 and PyTorch's autocast
fi

if [ -z "$ONLY" ] || [ "$ONLY" = amx ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/amx.sh" # bfloat16 on AMX tiles (skipped without AMX)
fi

if [ -z "$ONLY" ] || [ "$ONLY" = winograd ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/winograd.sh" # 3x3 convolutions by Winograd against direct and PyTorch
fi

if [ -z "$ONLY" ] || [ "$ONLY" = resnet ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/resnet.sh" # ResNet-18 with BatchNorm against PyTorch; BN against conv
fi
if [ -z "$ONLY" ] || [ "$ONLY" = zoo ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/zoo.sh" # torchvision's networks, trained, against PyTorch
fi
if [ -z "$ONLY" ] || [ "$ONLY" = allreduce ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/busbw.sh" # every transport and MPI_Allreduce, medians
fi

if [ -z "$ONLY" ] || [ "$ONLY" = mac ]; then
    BUILD=$BUILD sh "$here/mac.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = serve ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/serve.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = serve_batch ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/serve_batch.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = pg ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/pg.sh" # ddl_predict against PL/Python + PyTorch, rows/s
fi

if [ -z "$ONLY" ] || [ "$ONLY" = pg_batch ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/pg_batch.sh" # ddl_predict_batch against ddl_predict, rows/s and memory
fi

if [ -z "$ONLY" ] || [ "$ONLY" = ps ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/ps.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = wire ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/wire.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = halving ]; then # recursive halving against the ring, 4 ranks on one host
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/halving.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = hier ]; then # flat ring against the two-level all-reduce, 2 and 4 hosts x 2 ranks
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/hier.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = elastic ]; then # elastic mode's cost, and a replacement's state transfer
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/elastic.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = torchtrain ]; then # PyTorch's networks: outputs, per-step losses
    BUILD="$BUILD" sh "$here/torch_trains.sh"
fi
if [ -z "$ONLY" ] || [ "$ONLY" = acc5 ]; then # the issue's network's accuracy on a five-class folder, over seeds
    BUILD="$BUILD" sh "$here/acc5.sh"
fi
if [ -z "$ONLY" ] || [ "$ONLY" = twohost ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" EPOCHS="$EPOCHS" sh "$here/twohost.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = compress ]; then
    echo "== DDL_COMPRESS and accuracy: LeNet, 2 ranks over tcp, 5 epochs, seeds 1 2 42"
    export DDL_TOKEN=bench-compress-secret-0123456789
    for z in none bf16 fp16; do
        : > "/tmp/ddl-bench-acc-$z.txt"
        for seed in 1 2 42; do
            a=$(DDL_COMPRESS=$z "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" --epochs 5 --seed $seed --quiet \
                --data "$DATA" | field test_acc)
            echo "   DDL_COMPRESS=$z seed $seed: test accuracy $a"
            echo "$a" >> "/tmp/ddl-bench-acc-$z.txt"
        done
        eval "acc_$z=\$(awk '{ s += \$1 } END { printf \"%.4f\", s / NR }' /tmp/ddl-bench-acc-$z.txt)"
    done
    echo "compress_accuracy: none=$acc_none bf16=$acc_bf16 fp16=$acc_fp16"
    for z in bf16 fp16; do
        eval "a=\$acc_$z"
        record "LeNet test accuracy after 5 epochs, $z (mean of 3 seeds)" "$a" "float32" "$acc_none" \
            "$(awk -v a="$a" -v b="$acc_none" 'BEGIN { printf "%+.4f", a - b }')" "within 0.005"
    done
fi

print_table
