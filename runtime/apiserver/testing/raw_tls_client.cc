#include "runtime/apiserver/testing/raw_tls_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ctrlhost::apiserver::testing {

RawTlsClient::RawTlsClient(int port, int receive_buffer) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  if (receive_buffer > 0) {
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  timeval tv{20, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx_ == nullptr) return;
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return;
  SSL_set_fd(ssl, fd_);
  if (SSL_connect(ssl) != 1) {
    ERR_clear_error();
    SSL_free(ssl);
    return;
  }
  ssl_ = ssl;
}

RawTlsClient::~RawTlsClient() { Close(); }

bool RawTlsClient::Send(const std::string& bytes) {
  if (ssl_ == nullptr) return false;
  size_t sent = 0;
  while (sent < bytes.size()) {
    const int n = SSL_write(ssl_, bytes.data() + sent, static_cast<int>(bytes.size() - sent));
    if (n <= 0) {
      ERR_clear_error();
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string RawTlsClient::ReadUpTo(size_t limit) {
  std::string out;
  char buf[4096];
  while (ssl_ != nullptr && out.size() < limit) {
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) {
      ERR_clear_error();
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void RawTlsClient::Close() {
  if (ssl_ != nullptr) {
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (ctx_ != nullptr) {
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
  }
  if (fd_ >= 0) {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    fd_ = -1;
  }
}

std::string RequestWithPendingBody(const std::string& method, const std::string& path,
                                   const std::string& token, int content_length) {
  return absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", token,
                      "\r\nContent-Type: application/json\r\nContent-Length: ", content_length,
                      "\r\n\r\n");
}

}  // namespace ctrlhost::apiserver::testing
