#pragma once
// Socket helpers for the HTTP server: a listening socket that refuses a taken port, peer addresses, and writes
// bounded by a deadline on non-blocking sockets.
#include <chrono>
#include <string>
#include <string_view>

namespace fs::http {

// Listens on host:port (port 0 → any free port) with the given backlog; returns the socket and sets `port` to the
// bound port. Throws fs::Error naming the address when it cannot, a port in use included.
int listen_on(const std::string& host, int& port, int backlog);
// The peer's address as text ("127.0.0.1", "::1").
std::string peer_address(int fd);
void set_nonblocking(int fd);
// Writes all of `data`, waiting for the socket as needed until `deadline`; false on error, timeout or a closed peer.
bool send_all(int fd, std::string_view data, std::chrono::steady_clock::time_point deadline);
// Writes what fits now without waiting; false unless all of `data` went out.
bool send_now(int fd, std::string_view data);
// Raises the open-file limit to its hard limit; returns the new soft limit.
long raise_file_limit();

}  // namespace fs::http
