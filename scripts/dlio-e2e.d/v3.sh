# Sourced by scripts/dlio-e2e: MLPerf Storage v3.0's workloads (mlcommons/storage
# configs/dlio/workload/*_b200.yaml and the llama3 checkpoints) as DLIO f6796ed runs them from
# object storage, at two scales. Object sizes, batch sizes, read threads, computation times and
# AU rules are v3's; a scale shrinks only the files read, the epochs and the checkpoint's layers.
#
#   v3_spec WORKLOAD  -> "BASE override..." (Hydra, after `workload=BASE`), or fails
#   v3_synthetic      -> the --synthetic families of `sluice serve` for the workloads whose
#                        bytes DLIO never decodes on S3 (npz, jpeg: only their length counts)
#   v3_rule WORKLOAD  -> "AU_RULE BATCH COMPUTATION_S" (what one accelerator needs; the
#                        spec sets these three from it)
#
# Needs SCALE (ci|bench), BUCKET.

V3_WORKLOADS="unet3d_b200 retinanet_b200 dlrm_b200 flux_b200 llama3_8b llama3_70b"

# Files read per run and epochs, by scale: ci finishes the matrix in minutes; bench is the run
# whose table is in docs/mlperf.md. Retinanet keeps v3's full key count in the store (the run
# lists all 1,170,301 keys, as a real one does) and reads the first RETINANET_FILES.
case $SCALE in
  ci) V3_UNET3D_FILES=42 RETINANET_KEYS=24000 RETINANET_FILES=2400 DLRM_FILES=1 FLUX_FILES=2 V3_EPOCHS=2 ;;
  bench) V3_UNET3D_FILES=84 RETINANET_KEYS=1170301 RETINANET_FILES=4800 DLRM_FILES=1 FLUX_FILES=4 V3_EPOCHS=3 ;;
esac

v3_synthetic() {
  echo "unet3d_b200/train/img_{i}_of_{n}.npz:7200x146600628±68341808,retinanet_b200/train/img_{i}_of_{n}.jpeg:${RETINANET_KEYS}x322957"
}

# dlrm_b200's 200 columns (0b42eb5): dtypes in order, h float16, f float32, d float64, b int8,
# 761 B a row. The same layout as scripts/measure-parquet.d/dlrm.py. DLIO reads every column:
# it ignores the YAML's `read:` flags (only storage_options.columns selects).
DLRM_DTYPES=hhddfhfbhbffdfbhfffhddddhffhhfdfdfhhdbbbhfhfdbdddffbbfffbfhfdhdbfhbfhfhfhffdhbfdbbffhbhbfbffhfddfhbhhdhfdhhfdfddbhhbbdfbhhbbbhbbfbhfdhhdhfddhfbbdfdfddbbbddffbfhfhfhdhdhfbdhbdbbbbhhbdddhdbbhfdbdfdffddh
dlrm_columns() {
  local i out= t
  for ((i = 0; i < ${#DLRM_DTYPES}; i++)); do
    case ${DLRM_DTYPES:i:1} in h) t=float16 ;; f) t=float32 ;; d) t=float64 ;; b) t=int8 ;; esac
    out+="${out:+,}{name:feature_$(printf %03d "$i"),dtype:$t}"
  done
  echo "[$out]"
}

v3_spec() {
  local d=++workload.dataset r=++workload.reader t=++workload.train o=++workload.storage.storage_options
  local c=++workload.checkpoint m=++workload.model
  # The checkpoints, shrunk in layers only, to one: one save, one load. llama3_8b with one
  # rank is ZeRO 3 over one data-parallel rank: it saves the whole checkpoint. llama3_70b's
  # tensor parallelism of 8 needs 8 ranks; one rank in DLIO's subset mode saves and loads
  # its eighth.
  local ckpt="$c.checkpoint_folder=$(ckpt_folder) $c.num_checkpoints_write=1
    $c.num_checkpoints_read=1 $c.time_between_checkpoints=0.1 $m.num_layers=1"
  case $1 in
    llama3_8b) echo "llama_8b_zero3 $m.name=llama3_8b $ckpt"; return ;;
    llama3_70b) echo "llama_70b_zero3 $m.name=llama3_70b $ckpt $c.mode=subset $m.parallelism.data=1"; return ;;
  esac
  local au batch step
  read -r au batch step <<< "$(v3_rule "$1")" || return 1
  # What every v3 workload sets from its rule: batch, computation time, AU.
  local pace="$r.batch_size=$batch $t.computation_time=$step ++workload.metric.au=$au"
  case $1 in
    # unet3d_h100_s3 with v3's differences (stdev, computation time); read_threads 4 as v3.
    unet3d_b200) echo "unet3d_h100_s3 ++workload.model.name=unet3d_b200 $d.num_files_train=$V3_UNET3D_FILES
      $d.record_length_bytes=146600628 $d.record_length_bytes_stdev=68341808 $pace
      $r.read_threads=4 $o.prefetch_window=4 $t.epochs=$V3_EPOCHS" ;;
    # No jpeg S3 base in DLIO: unet3d_h100_s3 turned into retinanet_b200.
    retinanet_b200) echo "unet3d_h100_s3 ++workload.model.name=retinanet_b200 $d.format=jpeg
      $d.num_files_train=$RETINANET_FILES $d.num_samples_per_file=1 $d.record_length_bytes=322957
      $d.record_length_bytes_stdev=0 $d.record_length_bytes_resize=0 $pace
      $r.read_threads=8 $t.epochs=$V3_EPOCHS" ;;
    dlrm_b200) echo "dlrm_s3dlio_s3 ++workload.model.name=dlrm_b200 $d.num_files_train=$DLRM_FILES
      $d.num_samples_per_file=4718592 $d.record_length_bytes=761 $d.compression=none
      $d.parquet.row_group_size=6144 $d.parquet.columns=$(dlrm_columns) $pace
      $r.prefetch_size=2 $r.read_threads=4 $r.file_shuffle=seed $t.epochs=1
      $t.seed_change_epoch=True ~workload.storage.storage_options.prefetch_workers" ;;
    # One row group a file (288 rows of 2,164,832 B: DLIO's default row group is 1,024 rows):
    # each row group in flight holds 594 MiB, so every library keeps one at a time.
    flux_b200) echo "dlrm_s3dlio_s3 ++workload.model.name=flux_b200 $d.num_files_train=$FLUX_FILES
      $d.num_samples_per_file=288 $d.record_length_bytes=2164832 $d.compression=none
      $d.parquet.columns=[{name:t5_encodings,dtype:float32,size:524328},{name:clip_encodings,dtype:float32,size:409},{name:mean,dtype:float32,size:8232},{name:logvar,dtype:float32,size:8232},{name:timestamp,dtype:float32,size:7}]
      $pace $r.read_threads=8 $r.prefetch_size=2 $r.file_shuffle=seed $t.epochs=1
      $t.seed_change_epoch=True $o.prefetch_workers=1 $o.max_outstanding=1 $o.prefetch_window=1" ;;
    *) return 1 ;;
  esac
}

v3_rule() {
  case $1 in
    unet3d_b200) echo "0.90 7 0.162" ;;
    retinanet_b200) echo "0.85 24 0.04755" ;;
    dlrm_b200) echo "0.70 16384 0.000375" ;;
    flux_b200) echo "0.90 48 1.35" ;;
    *) return 1 ;;
  esac
}
