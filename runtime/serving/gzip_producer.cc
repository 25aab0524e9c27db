#include "runtime/serving/gzip_producer.h"

#include <zlib.h>

#include <utility>

namespace ctrlhost::serving {

struct GzipProducer::State {
  z_stream z{};
  bool ok = false;
};

GzipProducer::GzipProducer(std::unique_ptr<StreamProducer> inner)
    : inner_(std::move(inner)), state_(std::make_unique<State>()) {
  // 15 + 16: a gzip header and trailer around the deflate stream.
  state_->ok = deflateInit2(&state_->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                            Z_DEFAULT_STRATEGY) == Z_OK;
}

GzipProducer::~GzipProducer() {
  if (state_->ok) deflateEnd(&state_->z);
}

bool GzipProducer::Produce(std::string* out) {
  if (!state_->ok) return false;
  std::string piece;
  const bool more = inner_->Produce(&piece);
  if (piece.empty() && more) return true;
  z_stream& z = state_->z;
  z.next_in = reinterpret_cast<Bytef*>(piece.data());
  z.avail_in = static_cast<uInt>(piece.size());
  const int flush = more ? Z_SYNC_FLUSH : Z_FINISH;
  char buffer[16384];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    const int rc = deflate(&z, flush);
    if (rc == Z_STREAM_ERROR) {
      state_->ok = false;
      return false;
    }
    out->append(buffer, sizeof(buffer) - z.avail_out);
    if (flush == Z_FINISH ? rc == Z_STREAM_END : (z.avail_in == 0 && z.avail_out != 0)) break;
  }
  return more;
}

}  // namespace ctrlhost::serving
