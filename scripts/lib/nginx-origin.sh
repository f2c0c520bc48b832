# Sourced by scripts/measure-get and scripts/scale-run: a neutral S3 origin for read
# benchmarks. nginx serves COUNT objects of SIZE bytes as files (sendfile, page cache) under
# /$BUCKET/bench/, answers ListObjectsV2 (GET /$BUCKET?list-type=2...) with a static listing
# whose ETags are nginx's own (so If-Match holds), and speaks TLS 1.3 with a certificate for
# localhost signed by a throwaway CA. It checks no signature: its costs are not ours.
#
# nginx_origin DIR BIN COUNT SIZE CPUS WORKERS HTTP_ADDR HTTPS_ADDR
#   DIR: a scratch directory (mode 755: nginx workers run as another user); BIN: the sluice
#   binary, which writes the objects (its deterministic pattern, so `get --verify` works);
#   CPUS: taskset list for nginx. Sets ORIGIN_PID and writes DIR/ca.pem.
BUCKET=${BUCKET:-sluice-test}

# Waits until a `sluice serve` writing LOG says "ready"; prints the log and fails if it does
# not within a minute.
wait_ready() { # log
  for _ in $(seq 600); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.1; done
  cat "$1"
  return 1
}

nginx_origin() {
  local dir=$1 bin=$2 count=$3 size=$4 cpus=$5 workers=$6 http=$7 https=$8
  command -v nginx >/dev/null || { apt-get install -y -q nginx-light >/dev/null || { apt-get update -q && apt-get install -y -q nginx-light; }; }
  chmod 755 "$dir"
  "$bin" serve --addr 127.0.0.1:19099 --no-https --populate "$count" --object-size "$size" \
    --prefix bench/ > "$dir/populate.log" 2>&1 &
  local populate=$!
  wait_ready "$dir/populate.log"
  # The test server's default credentials (nginx checks none).
  local creds=(env AWS_ACCESS_KEY_ID=sluice-test-access AWS_SECRET_ACCESS_KEY=sluice-test-secret AWS_REGION=us-east-1)
  "${creds[@]}" "$bin" get --endpoint http://127.0.0.1:19099 -o "$dir/www/$BUCKET/bench" "s3://$BUCKET/bench/" > /dev/null
  kill $populate
  # nginx's ETag is "<mtime hex>-<size hex>".
  python3 - "$dir/www" "$BUCKET" > "$dir/www/list.xml" <<'PY'
import os, sys, datetime
root, bucket = sys.argv[1], sys.argv[2]
print('<?xml version="1.0" encoding="UTF-8"?>')
print(f'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>{bucket}</Name><IsTruncated>false</IsTruncated>')
base = os.path.join(root, bucket)
for d, _, files in sorted(os.walk(base)):
    for f in sorted(files):
        st = os.stat(os.path.join(d, f))
        key = os.path.relpath(os.path.join(d, f), base)
        when = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        print(f'<Contents><Key>{key}</Key><LastModified>{when}</LastModified>'
              f'<ETag>"{int(st.st_mtime):x}-{st.st_size:x}"</ETag><Size>{st.st_size}</Size></Contents>')
print('</ListBucketResult>')
PY
  # A CA and a leaf for localhost signed by it (rustls refuses a CA certificate as end entity).
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -days 2 -subj /CN=sluice-bench-ca -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req "${ec[@]}" -subj /CN=localhost -keyout "$dir/key.pem" -out "$dir/leaf.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' > "$dir/leaf.ext"
  openssl x509 -req -in "$dir/leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
    -extfile "$dir/leaf.ext" -out "$dir/cert.pem" 2>/dev/null
  mkdir -p "$dir/nginx" "$dir/www/.put-tmp" "$dir/www/$BUCKET/put"
  chmod 777 "$dir/www/.put-tmp" "$dir/www/$BUCKET/put"
  cat > "$dir/nginx.conf" <<EOF
worker_processes $workers;
daemon off;
pid $dir/nginx/pid;
error_log $dir/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $dir/nginx;
  ssl_protocols TLSv1.3;
  server {
    listen $http reuseport;
    listen $https ssl reuseport;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;
    root $dir/www;
    location ~ ^/$BUCKET/?\$ { default_type application/xml; try_files /list.xml =404; }
    # A write sink for upload benchmarks (scripts/measure-put): a PUT is stored as a file
    # once its whole body has arrived (WebDAV), and answered with a fixed ETag; a part
    # overwrites its object's file. Create and Complete of a multipart upload get S3's XML.
    location /$BUCKET/put/ {
      dav_methods PUT DELETE;
      create_full_put_path on;
      client_max_body_size 0;
      client_body_temp_path $dir/www/.put-tmp;
      add_header ETag '"0123456789abcdef0123456789abcdef"' always;
      default_type application/xml;
      if (\$args ~ "(^|&)uploads(=|&|\$)") {
        return 200 '<InitiateMultipartUploadResult><Bucket>$BUCKET</Bucket><Key>k</Key><UploadId>sink</UploadId></InitiateMultipartUploadResult>';
      }
      if (\$request_method = POST) {
        return 200 '<CompleteMultipartUploadResult><Bucket>$BUCKET</Bucket><Key>k</Key><ETag>"0123456789abcdef0123456789abcdef-1"</ETag></CompleteMultipartUploadResult>';
      }
    }
  }
}
EOF
  taskset -c "$cpus" nginx -c "$dir/nginx.conf" -e "$dir/nginx/error.log" &
  ORIGIN_PID=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://$http/$BUCKET/" && break; sleep 0.1; done
  # Every object in the page cache before the first measured run.
  "${creds[@]}" "$bin" get --endpoint "http://$http" "s3://$BUCKET/bench/" > /dev/null
}

# The listed keys, one per line.
origin_keys() { # http_addr
  curl -sf "http://$1/$BUCKET?list-type=2&prefix=bench/" | python3 -c "
import re, sys
print('\n'.join(re.findall(r'<Key>([^<]+)</Key>', sys.stdin.read())))"
}
