#include "runtime/serving/gzip_producer.h"

#include <zlib.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ctrlhost::serving {
namespace {

class Pieces : public StreamProducer {
 public:
  explicit Pieces(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  bool Produce(std::string* out) override {
    if (next_ < pieces_.size()) out->append(pieces_[next_++]);
    return next_ < pieces_.size();
  }
  absl::Time NextCall() const override { return absl::InfiniteFuture(); }

 private:
  std::vector<std::string> pieces_;
  size_t next_ = 0;
};

// Inflates a gzip stream, complete or not; `complete` says whether it reached its end.
std::string Gunzip(const std::string& gz, bool* complete) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buffer[4096];
  int rc = Z_OK;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - z.avail_out);
  } while (rc == Z_OK && (z.avail_in > 0 || z.avail_out == 0));
  *complete = rc == Z_STREAM_END;
  inflateEnd(&z);
  return out;
}

TEST(GzipProducerTest, EveryPieceCanBeDecodedAsSoonAsItIsWrittenAndTheLastEndsTheStream) {
  std::vector<std::string> pieces;
  std::string all;
  for (int i = 0; i < 40; ++i) {
    // Some pieces larger than the compressor's 16 KiB output buffer (random-ish content).
    std::string piece;
    for (int j = 0; j < (i % 7 == 0 ? 20000 : 300); ++j) {
      piece.push_back(static_cast<char>('a' + (i * 31 + j * 17 + (j * j) % 13) % 26));
    }
    all += piece;
    pieces.push_back(std::move(piece));
  }
  GzipProducer gz(std::make_unique<Pieces>(pieces));
  std::string stream;
  std::string expected;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const bool more = gz.Produce(&stream);
    EXPECT_EQ(more, i + 1 < pieces.size());
    expected += pieces[i];
    bool complete = false;
    EXPECT_EQ(Gunzip(stream, &complete), expected) << "after piece " << i;
    EXPECT_EQ(complete, !more);
  }
  bool complete = false;
  EXPECT_EQ(Gunzip(stream, &complete), all);
  EXPECT_TRUE(complete);
}

TEST(GzipProducerTest, AnEmptyStreamIsAValidEmptyGzip) {
  GzipProducer gz(std::make_unique<Pieces>(std::vector<std::string>{""}));
  std::string stream;
  EXPECT_FALSE(gz.Produce(&stream));
  bool complete = false;
  EXPECT_EQ(Gunzip(stream, &complete), "");
  EXPECT_TRUE(complete);
}

}  // namespace
}  // namespace ctrlhost::serving
