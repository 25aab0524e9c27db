// Watch: a chunked stream of {"type":..., "object":...} lines, filtered by label and field
// selectors, with bookmarks, initial events and timeouts as kube-apiserver serves them.
#include <array>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

// How long one call of the stream function waits for events before returning (so that client
// disconnects and server shutdown are noticed).
constexpr absl::Duration kPollSlice = absl::Milliseconds(500);
constexpr size_t kMaxEventsPerChunk = 1000;
// Events per piece of a watch written by an event loop: its window bounds what waits to be
// written, this bounds what one piece adds to it.
constexpr size_t kMaxEventsPerPiece = 200;

std::string Query(const ApiRequest& req, const char* key) {
  auto it = req.query.find(key);
  return it == req.query.end() ? "" : it->second;
}

bool IsTrue(const std::string& v) { return ParseQueryBool(v); }

struct WatchState {
  ~WatchState() {
    if (open_watches != nullptr) open_watches->Remove(watch.get());
  }
  ApiHandlers::WatchSet* open_watches = nullptr;  // where `watch` is registered, if it is
  ResourcePtr r;
  ObjectFilter filter;
  std::unique_ptr<apiserver::Watch> watch;
  std::vector<ObjectPtr> initial;  // synthetic ADDED events still to send
  size_t initial_sent = 0;
  // False until every initial event (and the initial-events-end bookmark) was written; also
  // when there are none, so that an empty collection still gets its bookmark.
  bool initial_done = false;
  bool send_initial_end_bookmark = false;
  bool bookmarks = false;
  int64_t progress = 0;
  absl::Time deadline;
  absl::Time last_bookmark;
  const std::atomic<bool>* stopping = nullptr;
  common::Clock* clock = nullptr;
  absl::Duration bookmark_interval;
  // Accept asked for meta.k8s.io Tables (kubectl get -w): each event's object is a one-row
  // Table with its column definitions.
  bool table = false;
  TableOptions table_options;
  // Accept asked for meta.k8s.io/v1 PartialObjectMetadata (a metadata-only informer): each
  // event's object, and the bookmarks, are PartialObjectMetadata.
  bool metadata_only = false;
  // Written by an event loop thread that serves many watches: event lines are shared through
  // the thread's LineCache.
  bool share_lines = false;
};

// The event lines a thread made last, keyed by object, resource, type and form: a loop thread
// writing the same event to many watchers serializes it once. An entry holds its object, so a
// key's pointer is never reused while it is cached. Thread-confined (thread_local).
class LineCache {
 public:
  const std::string* Find(const ObjectPtr& object, const ResourceInfo* r, char type,
                          bool metadata_only) const {
    for (const Entry& e : entries_) {
      if (e.object == object && e.r == r && e.type == type && e.metadata_only == metadata_only) {
        return &e.line;
      }
    }
    return nullptr;
  }
  const std::string& Put(ObjectPtr object, const ResourceInfo* r, char type, bool metadata_only,
                         std::string line) {
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % kEntries;
    e = Entry{std::move(object), r, type, metadata_only, std::move(line)};
    return e.line;
  }

 private:
  // A committed batch's events, for the few forms watchers ask for.
  static constexpr size_t kEntries = 64;
  struct Entry {
    ObjectPtr object;
    const ResourceInfo* r = nullptr;
    char type = 0;
    bool metadata_only = false;
    std::string line;
  };
  std::array<Entry, kEntries> entries_;
  size_t next_ = 0;
};

std::string MakeEventLine(WatchState& st, const char* type, const ObjectPtr& object) {
  if (absl::Status intact = CheckIntact(*object); !intact.ok()) {
    return absl::StrCat("{\"type\":\"ERROR\",\"object\":", kube::ToHttpResponse(intact).second,
                        "}\n");
  }
  if (st.metadata_only) {
    return absl::StrCat("{\"type\":\"", type, "\",\"object\":", PartialMetadataBytes(object->value),
                        "}\n");
  }
  if (!st.table) {
    return absl::StrCat("{\"type\":\"", type, "\",\"object\":", ServedBytes(*st.r, object->value),
                        "}\n");
  }
  nlohmann::json table =
      TableOf(*st.r, {object}, object->mod_revision, "", st.clock->Now(), st.table_options);
  return absl::StrCat("{\"type\":\"", type, "\",\"object\":", Dump(table), "}\n");
}

// Appends the event's line to `out`. Tables (rows with an age) are made per watch.
void AppendEventLine(WatchState& st, const char* type, const ObjectPtr& object, std::string* out) {
  if (!st.share_lines || st.table) {
    out->append(MakeEventLine(st, type, object));
    return;
  }
  thread_local LineCache cache;
  const std::string* line = cache.Find(object, st.r.get(), type[0], st.metadata_only);
  if (line == nullptr) {
    line =
        &cache.Put(object, st.r.get(), type[0], st.metadata_only, MakeEventLine(st, type, object));
  }
  out->append(*line);
}

// A bookmark. The one that ends the initial events (sendInitialEvents) carries the
// k8s.io/initial-events-end annotation and, as kube-apiserver 1.32+ does, the list blueprint:
// an empty list of the kind a LIST would have answered, base64-encoded, from which client-go's
// WatchList builds the list it hands back (without it, client-go 0.32+ falls back to a LIST).
std::string BookmarkLine(const WatchState& st, int64_t revision, bool initial_end) {
  const ResourceInfo& r = *st.r;
  const std::string kind = st.metadata_only ? "PartialObjectMetadata" : r.kind;
  const std::string api_version = st.metadata_only ? "meta.k8s.io/v1" : r.ApiVersion();
  nlohmann::json meta = {{"resourceVersion", std::to_string(revision)}};
  if (initial_end) {
    meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    if (!st.table) {
      nlohmann::json blueprint = {
          {"kind", st.metadata_only ? std::string("PartialObjectMetadataList") : r.list_kind},
          {"apiVersion", api_version},
          {"metadata", nlohmann::json::object()}};
      // KEP-5866: the list client-go builds from it says which shard it holds.
      if (st.filter.shard != nullptr) {
        blueprint["metadata"]["shardInfo"] = {{"selector", st.filter.shard->text()}};
      }
      meta["annotations"]["kubernetes.io/initial-events-list-blueprint"] =
          absl::Base64Escape(Dump(blueprint));
    }
  }
  nlohmann::json obj = {{"kind", kind}, {"apiVersion", api_version}, {"metadata", meta}};
  return absl::StrCat("{\"type\":\"BOOKMARK\",\"object\":", Dump(obj), "}\n");
}

std::string ErrorLine(const absl::Status& s) {
  return absl::StrCat("{\"type\":\"ERROR\",\"object\":", Dump(kube::ToStatusJson(s)), "}\n");
}

// One call of the stream: sends what is ready; false when the watch is over. Waits up to
// kPollSlice for events when `wait`; never blocks otherwise.
bool Pump(WatchState& st, const std::function<bool(absl::string_view)>& write, bool wait) {
  if (st.stopping->load()) return false;
  std::string out;
  // Initial events first, in bounded chunks.
  if (!st.initial_done) {
    const size_t end = std::min(st.initial.size(),
                                st.initial_sent + (wait ? kMaxEventsPerChunk : kMaxEventsPerPiece));
    for (; st.initial_sent < end; ++st.initial_sent) {
      AppendEventLine(st, "ADDED", st.initial[st.initial_sent], &out);
    }
    if (st.initial_sent == st.initial.size()) {
      st.initial_done = true;
      st.initial.clear();
      st.initial.shrink_to_fit();
      if (st.send_initial_end_bookmark) {
        out += BookmarkLine(st, st.progress, /*initial_end=*/true);
        st.last_bookmark = st.clock->Now();
      }
    }
    if (!out.empty()) return write(out);
  }
  const absl::Time now = st.clock->Now();
  if (now >= st.deadline) return false;
  const absl::Time wait_until =
      wait ? std::min(st.deadline, now + kPollSlice) : absl::InfinitePast();
  int64_t progress = st.progress;
  auto events =
      st.watch->Next(wait_until, wait ? kMaxEventsPerChunk : kMaxEventsPerPiece, &progress);
  if (!events.ok()) {
    if (absl::IsCancelled(events.status())) return false;
    write(ErrorLine(events.status()));
    return false;
  }
  st.progress = std::max(st.progress, progress);
  for (const WatchEvent& e : *events) {
    const bool now_matches = e.type != WatchEvent::Type::kDeleted && st.filter.Matches(*e.object);
    const bool was_matching = e.previous != nullptr && st.filter.Matches(*e.previous);
    if (e.type == WatchEvent::Type::kDeleted) {
      // The final state decides for a delete, as in kube-apiserver.
      if (st.filter.Matches(*e.object) || was_matching) {
        AppendEventLine(st, "DELETED", e.object, &out);
      }
    } else if (now_matches && was_matching) {
      AppendEventLine(st, "MODIFIED", e.object, &out);
    } else if (now_matches) {
      AppendEventLine(st, "ADDED", e.object, &out);
    } else if (was_matching) {
      AppendEventLine(st, "DELETED", e.object, &out);
    }
    st.progress = std::max(st.progress, e.object->mod_revision);
  }
  if (out.empty() && st.bookmarks && st.clock->Now() - st.last_bookmark >= st.bookmark_interval &&
      st.progress > 0) {
    out = BookmarkLine(st, st.progress, false);
    st.last_bookmark = st.clock->Now();
  }
  if (out.empty()) return true;
  return write(out);
}

// The watch's answer as a blocking stream (a thread per watch) and as a producer for the
// stream loop.
void SetStreams(const std::shared_ptr<WatchState>& st, ApiResponse* resp) {
  resp->stream = [st](const std::function<bool(absl::string_view)>& write) {
    return Pump(*st, write, /*wait=*/true);
  };
  resp->produce = [st](std::string* out) {
    st->share_lines = true;
    return Pump(
        *st,
        [out](absl::string_view piece) {
          out->append(piece.data(), piece.size());
          return true;
        },
        /*wait=*/false);
  };
  resp->next_call = [st]() {
    // More initial events wait; else the end of the watch, or its next bookmark.
    if (!st->initial_done) return absl::InfinitePast();
    absl::Time next = st->deadline;
    // (Before any revision a bookmark has nothing to say; an event wakes it first.)
    if (st->bookmarks && st->progress > 0) {
      next = std::min(next, st->last_bookmark + st->bookmark_interval);
    }
    return next;
  };
}

}  // namespace

bool ApiHandlers::WatchSet::Add(apiserver::Watch* watch) {
  common::MutexLock lock(&mu_);
  if (stopped_) return false;
  watches_.insert(watch);
  return true;
}

void ApiHandlers::WatchSet::Remove(apiserver::Watch* watch) {
  common::MutexLock lock(&mu_);
  watches_.erase(watch);
  if (watches_.empty()) cv_.SignalAll();
}

void ApiHandlers::WatchSet::StopAll() {
  // Under mu_: a Watch is removed (under mu_) before it is destroyed, so each one is alive here.
  common::MutexLock lock(&mu_);
  stopped_ = true;
  for (apiserver::Watch* watch : watches_) watch->Stop();
}

bool ApiHandlers::WatchSet::WaitEmpty(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  common::MutexLock lock(&mu_);
  while (!watches_.empty()) {
    if (common::Clock::Real()->WaitWithDeadline(&mu_, &cv_, deadline)) break;
  }
  return watches_.empty();
}

void ApiHandlers::StopWatches() {
  stopping_ = true;
  watches_.StopAll();
}

bool ApiHandlers::WaitWatchesDone(absl::Duration timeout) { return watches_.WaitEmpty(timeout); }

absl::StatusOr<ApiResponse> ApiHandlers::Watch(const Target& t, const ApiRequest& req) {
  auto st = std::make_shared<WatchState>();
  st->r = t.r;
  ASSIGN_OR_RETURN(st->filter, MakeFilter(t, req));
  if (!t.name.empty()) {
    // GET .../name?watch=1 watches one object: a field selector on its name.
    auto sel = kube::FieldSelector::Parse(absl::StrCat("metadata.name=", t.name));
    if (!sel.ok()) return kube::BadRequestError(sel.status().message());
    if (st->filter.fields != nullptr) {
      return kube::BadRequestError("a field selector cannot be combined with a watch of one name");
    }
    st->filter.fields = std::make_shared<kube::FieldSelector>(*std::move(sel));
  }
  st->bookmarks = IsTrue(Query(req, "allowWatchBookmarks"));
  st->table = WantsTable(req.accept);
  st->metadata_only = WantsPartialMetadata(req.accept);
  if (st->table) {
    ASSIGN_OR_RETURN(st->table_options, TableOptionsOf(req));
  }
  const std::string rv = Query(req, "resourceVersion");
  const std::string match = Query(req, "resourceVersionMatch");
  const std::string initial_param = Query(req, "sendInitialEvents");
  const bool send_initial_param = IsTrue(initial_param);
  if (!initial_param.empty()) {
    if (match != "NotOlderThan") {
      return kube::InvalidError(
          "meta.k8s.io", "ListOptions", "",
          {{"FieldValueForbidden", "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch"}});
    }
    if (send_initial_param && !st->bookmarks) {
      return kube::InvalidError(
          "meta.k8s.io", "ListOptions", "",
          {{"FieldValueForbidden", "sendInitialEvents requires allowWatchBookmarks=true",
            "allowWatchBookmarks"}});
    }
  } else if (!match.empty()) {
    return kube::BadRequestError("resourceVersionMatch is only allowed with sendInitialEvents");
  }

  int64_t from = 0;
  bool initial = false;
  if (rv.empty() || rv == "0") {
    initial = initial_param.empty() || send_initial_param;
  } else {
    if (!absl::SimpleAtoi(rv, &from) || from < 0) {
      return kube::BadRequestError(absl::StrCat("invalid resource version \"", rv, "\""));
    }
    initial = send_initial_param;
  }
  const std::string prefix = t.ns.empty() ? t.r->KeyPrefix() : t.r->NamespacePrefix(t.ns);
  if (initial) {
    Store::ListOptions lo;
    lo.prefix = prefix;
    ObjectFilter* f = &st->filter;
    if (!f->Empty()) lo.filter = [f](const StoredObject& o) { return f->Matches(o); };
    ASSIGN_OR_RETURN(Store::ListResult list, store_->List(lo));
    if (from > list.revision) {
      return kube::TimeoutError(
          absl::StrCat("Too large resource version: ", from, ", current: ", list.revision));
    }
    st->initial = std::move(list.items);
    from = list.revision;
    st->send_initial_end_bookmark = send_initial_param;
  } else if (rv.empty() || rv == "0") {
    // sendInitialEvents=false without a resourceVersion: only changes from now on (not the
    // whole retained history from revision 0).
    from = store_->Revision();
  }
  ASSIGN_OR_RETURN(st->watch, store_->Watch(prefix, from));
  if (!watches_.Add(st->watch.get())) {
    return absl::UnavailableError("the server is shutting down");
  }
  st->open_watches = &watches_;
  st->progress = from;

  absl::Duration timeout = options_.max_watch_timeout;
  const std::string ts = Query(req, "timeoutSeconds");
  if (!ts.empty()) {
    int64_t secs = 0;
    if (!absl::SimpleAtoi(ts, &secs) || secs < 0) {
      return kube::BadRequestError(absl::StrCat("invalid timeoutSeconds \"", ts, "\""));
    }
    if (secs > 0) timeout = std::min(timeout, absl::Seconds(secs));
  }
  st->clock = clock_;
  st->deadline = clock_->Now() + timeout;
  st->last_bookmark = clock_->Now();
  st->stopping = &stopping_;
  st->bookmark_interval = options_.bookmark_interval;

  ApiResponse resp;
  // kube-apiserver's media type of watch streams. Unlike plain "application/json" it also keeps
  // the HTTP layer from gzip-compressing the stream, which would hold events back in the
  // compressor's buffer.
  resp.content_type = "application/json;stream=watch";
  SetStreams(st, &resp);
  return resp;
}

}  // namespace ctrlhost::apiserver
