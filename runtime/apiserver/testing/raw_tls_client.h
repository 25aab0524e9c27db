// RawTlsClient: a TLS connection to a test server that sends bytes as given and reads what
// comes back, for requests no HTTP client library sends: a write whose declared body never
// arrives (it holds the request, and its in-flight seat, until the test lets it go), or a
// large LIST sent and never read (with a small receive buffer, the server's writes block).
//
//   RawTlsClient held(port);
//   ASSERT_TRUE(held.ok());
//   held.Send(RequestWithPendingBody("POST", "/api/v1/namespaces/a/configmaps", token));
//   ...
//   held.Close();
//
// The server's certificate is not verified (a test talks to its own server). Thread-compatible.
#ifndef CTRLHOST_RUNTIME_APISERVER_TESTING_RAW_TLS_CLIENT_H_
#define CTRLHOST_RUNTIME_APISERVER_TESTING_RAW_TLS_CLIENT_H_

#include <string>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace ctrlhost::apiserver::testing {

class RawTlsClient {
 public:
  // Connects to 127.0.0.1:`port` and completes the TLS handshake (bounded: 20 s).
  // `receive_buffer` > 0 sets SO_RCVBUF first (a small one makes a client that reads nothing
  // block the server's writes early).
  explicit RawTlsClient(int port, int receive_buffer = 0);
  ~RawTlsClient();
  RawTlsClient(const RawTlsClient&) = delete;
  RawTlsClient& operator=(const RawTlsClient&) = delete;

  bool ok() const { return ssl_ != nullptr; }
  bool Send(const std::string& bytes);
  // Reads until the peer closes or `limit` bytes arrived (each read bounded: 20 s).
  std::string ReadUpTo(size_t limit);
  // Shuts the connection down and frees it; idempotent.
  void Close();

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

// "METHOD PATH HTTP/1.1" with Host and `Authorization: Bearer token`, declaring a body of
// `content_length` bytes that the caller sends later, or never: the server holds the request
// (and its in-flight seat) while it waits for the body. For methods with a body only (POST,
// PUT, PATCH, DELETE): httplib reads no body of a GET.
std::string RequestWithPendingBody(const std::string& method, const std::string& path,
                                   const std::string& token, int content_length = 5);

}  // namespace ctrlhost::apiserver::testing

#endif  // CTRLHOST_RUNTIME_APISERVER_TESTING_RAW_TLS_CLIENT_H_
