// GzipProducer: a StreamProducer whose pieces are another producer's, gzip-compressed (RFC 1952)
// as one stream: what a chunked answer with `Content-Encoding: gzip` carries. Each piece is
// flushed (Z_SYNC_FLUSH), so the client can decode everything it has received; the last call
// finishes the stream.
//
//   auto gz = std::make_unique<GzipProducer>(std::move(list_producer));
//   loop->Adopt(fd, ssl, std::move(gz), ...);
//
// Thread-compatible (a StreamProducer is called by one loop thread).
#ifndef CTRLHOST_RUNTIME_SERVING_GZIP_PRODUCER_H_
#define CTRLHOST_RUNTIME_SERVING_GZIP_PRODUCER_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "runtime/serving/stream_loop.h"

namespace ctrlhost::serving {

class GzipProducer : public StreamProducer {
 public:
  explicit GzipProducer(std::unique_ptr<StreamProducer> inner);
  ~GzipProducer() override;
  GzipProducer(const GzipProducer&) = delete;
  GzipProducer& operator=(const GzipProducer&) = delete;

  // False (the stream ends) also when zlib fails: what was compressed so far is written and the
  // client sees a truncated gzip stream rather than a wrong one.
  bool Produce(std::string* out) override;
  absl::Time NextCall() const override { return inner_->NextCall(); }

 private:
  struct State;
  std::unique_ptr<StreamProducer> inner_;
  std::unique_ptr<State> state_;
};

}  // namespace ctrlhost::serving

#endif  // CTRLHOST_RUNTIME_SERVING_GZIP_PRODUCER_H_
