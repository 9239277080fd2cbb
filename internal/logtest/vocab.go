package logtest

// Read-only tables the generator draws from. They are package-level because
// they never change; every Generator builds its own per-Config state.
//
// Order matters: the Zipf rank of a word is its position in its list, so the
// first entries are the most frequent. Changing any list changes the output
// for every seed (the golden test in logtest_test.go will say so).

// words is the filler vocabulary, most frequent first, sampled with a Zipf
// law: a handful of words ("the", "to", "request") make up a large share of
// the tokens and most appear rarely, as in real logs.
var words = []string{
	"the", "to", "request", "for", "user", "of", "in", "is", "from", "and",
	"on", "with", "a", "id", "not", "session", "cache", "connection", "at", "by",
	"service", "completed", "started", "failed", "response", "key", "found", "event", "new", "sent",
	"received", "job", "task", "queue", "message", "error", "status", "client", "server", "handler",
	"processing", "update", "token", "config", "database", "query", "worker", "batch", "time", "after",
	"retry", "pool", "thread", "node", "shard", "lock", "state", "order", "account", "payment",
	"will", "be", "was", "has", "no", "all", "been", "this", "that", "using",
	"loaded", "stored", "expired", "invalid", "missing", "skipped", "closed", "opened", "accepted", "rejected",
	"scheduled", "finished", "starting", "stopping", "ready", "healthy", "unhealthy", "degraded", "pending", "active",
	"idle", "busy", "slow", "fast", "timeout", "limit", "rate", "quota", "bytes", "records",
	"rows", "items", "entries", "keys", "files", "blocks", "segments", "chunks", "pages", "objects",
	"http", "grpc", "tcp", "dns", "tls", "auth", "login", "logout", "signup", "checkout",
	"cart", "product", "inventory", "price", "invoice", "refund", "charge", "card", "email", "notification",
	"webhook", "callback", "upstream", "downstream", "backend", "frontend", "proxy", "gateway", "balancer", "router",
	"metrics", "trace", "span", "log", "audit", "policy", "role", "permission", "scope", "claim",
	"header", "body", "payload", "schema", "version", "migration", "index", "table", "column", "partition",
	"replica", "leader", "follower", "election", "heartbeat", "snapshot", "compaction", "flush", "commit", "rollback",
	"transaction", "consumer", "producer", "topic", "offset", "lag", "rebalance", "subscription", "stream", "channel",
	"socket", "port", "address", "host", "region", "zone", "cluster", "namespace", "pod", "container",
	"image", "deployment", "rollout", "restart", "probe", "liveness", "readiness", "volume", "mount", "disk",
	"memory", "cpu", "heap", "gc", "pause", "allocation", "buffer", "capacity", "threshold", "watermark",
	"backoff", "jitter", "deadline", "cancelled", "aborted", "interrupted", "resumed", "throttled", "dropped", "evicted",
	"hit", "miss", "warmup", "preload", "refresh", "invalidate", "purge", "sync", "async", "poll",
	"dispatch", "route", "resolve", "lookup", "fetch", "store", "persist", "serialize", "decode", "encode",
	"compress", "decompress", "encrypt", "decrypt", "sign", "verify", "validate", "parse", "render", "upload",
	"download", "export", "import", "report", "summary", "daily", "hourly", "nightly", "cron", "schedule",
	"tenant", "customer", "merchant", "vendor", "partner", "admin", "operator", "guest", "anonymous", "internal",
	"external", "public", "private", "primary", "secondary", "fallback", "default", "legacy", "beta", "canary",
	"feature", "flag", "experiment", "variant", "cohort", "segment", "campaign", "coupon", "discount", "loyalty",
	"shipment", "carrier", "tracking", "warehouse", "fulfillment", "backorder", "reservation", "allocation", "picking", "packing",
	"search", "suggest", "ranking", "relevance", "facet", "filter", "sort", "paginate", "cursor", "scroll",
	"avatar", "profile", "preferences", "settings", "locale", "timezone", "currency", "country", "language", "theme",
	"attachment", "thumbnail", "preview", "transcode", "bitrate", "codec", "manifest", "playlist", "segment", "cdn",
	"idempotency", "dedupe", "reconcile", "settlement", "ledger", "balance", "payout", "chargeback", "dispute", "fraud",
	"captcha", "mfa", "otp", "password", "credential", "certificate", "keystore", "truststore", "rotation", "revocation",
	"kafka", "redis", "postgres", "mysql", "elasticsearch", "s3", "dynamodb", "memcached", "rabbitmq", "etcd",
	"zookeeper", "consul", "vault", "envoy", "nginx", "haproxy", "istio", "jaeger", "prometheus", "grafana",
	"quux", "frobnicate", "whatchamacallit", "bikeshed", "yak", "kludge", "shim", "polyfill", "monkeypatch", "hotfix",
}

// apps names the streams; stream i uses apps[i%len(apps)], suffixed when
// there are more streams than names.
var apps = []string{
	"api", "payments", "auth", "orders", "search", "inventory", "gateway", "billing",
	"notifications", "users", "checkout", "shipping", "catalog", "pricing", "media", "reports",
}

// javaPackages and javaClasses make logger names and stack frames.
var javaClasses = []string{
	"OrderService", "PaymentClient", "ChargeProcessor", "UserRepository", "SessionManager",
	"InventoryClient", "CartController", "CheckoutHandler", "TokenValidator", "CacheLoader",
	"KafkaConsumerWorker", "JdbcTemplate", "HttpRequestExecutor", "RetryTemplate", "ShipmentScheduler",
	"InvoiceRenderer", "SearchIndexer", "PriceCalculator", "NotificationSender", "AuditLogger",
}

var javaFrames = []string{
	"org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:897)",
	"org.springframework.web.servlet.DispatcherServlet.doDispatch(DispatcherServlet.java:1067)",
	"org.springframework.aop.framework.ReflectiveMethodInvocation.proceed(ReflectiveMethodInvocation.java:186)",
	"org.springframework.transaction.interceptor.TransactionInterceptor.invoke(TransactionInterceptor.java:119)",
	"org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:166)",
	"org.apache.catalina.core.StandardWrapperValve.invoke(StandardWrapperValve.java:202)",
	"org.apache.tomcat.util.threads.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1191)",
	"org.apache.http.impl.execchain.MainClientExec.execute(MainClientExec.java:236)",
	"org.apache.http.impl.client.CloseableHttpClient.execute(CloseableHttpClient.java:83)",
	"com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:181)",
	"org.postgresql.core.v3.QueryExecutorImpl.execute(QueryExecutorImpl.java:356)",
	"org.apache.kafka.clients.consumer.KafkaConsumer.poll(KafkaConsumer.java:1250)",
	"java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)",
	"java.base/java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:635)",
	"java.base/java.lang.Thread.run(Thread.java:840)",
	"java.base/sun.nio.ch.NioSocketImpl.timedFinishConnect(NioSocketImpl.java:546)",
	"java.base/java.net.Socket.connect(Socket.java:633)",
	"java.base/java.util.HashMap.resize(HashMap.java:702)",
	"java.base/java.util.Arrays.copyOf(Arrays.java:3537)",
	"java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)",
}

// exceptions thrown in ordinary error lines, with their message templates.
var exceptions = []struct{ class, msg string }{
	{"java.net.SocketTimeoutException", "connect timed out"},
	{"java.net.SocketTimeoutException", "Read timed out"},
	{"java.lang.IllegalStateException", "Expected BEGIN_OBJECT but was STRING at line 1 column {n}"},
	{"java.lang.NullPointerException", "Cannot invoke \"String.length()\" because \"name\" is null"},
	{"org.springframework.dao.DataIntegrityViolationException", "could not execute statement; constraint [orders_pkey]"},
	{"java.util.concurrent.TimeoutException", "timeout waiting for lock after {dur}"},
	{"com.example.payments.CardDeclinedException", "card declined code={code}"},
	{"java.io.IOException", "Broken pipe"},
	{"org.apache.kafka.common.errors.RebalanceInProgressException", "offset commit failed for partition {n}"},
	{"java.lang.IllegalArgumentException", "invalid currency {word}"},
}

// causes are the "Caused by:" lines under an exception.
var causes = []struct{ class, msg string }{
	{"java.net.ConnectException", "Connection refused"},
	{"java.net.SocketTimeoutException", "connect timed out"},
	{"org.postgresql.util.PSQLException", "ERROR: duplicate key value violates unique constraint \"orders_pkey\""},
	{"java.io.EOFException", "unexpected end of stream on {ip}:{port}"},
	{"javax.net.ssl.SSLHandshakeException", "PKIX path building failed"},
}

// Message templates by level. Slots in braces are filled by the generator:
// {user} the request's user id, {ip} an internal peer's IPv4, {cip} the
// request's client IPv4, {port}, {n} small number, {big} large number,
// {obj} the id of the order (or row, shipment) the request is about,
// {dur} duration, {uuid} the UUID of the payment (or cart) the request is
// about, {hex8} 8 hex digits, {session} the request's
// session id, {build} the service's build hash, {word} Zipf word,
// {words} 2-5 Zipf words, {host} a peer host name, {code} error code,
// {path} request path, {table} table name, {pct} percentage.
var infoMsgs = []string{
	"request completed",
	"user {user} logged in from {cip}",
	"cache miss for key user:{user}",
	"cache hit for key session:{session}",
	"processing batch {n} of {n}",
	"scheduled job {word} finished in {dur}",
	"connection pool stats active={n} idle={n} waiting=0",
	"sent notification to user {user}",
	"order {obj} created for user {user}",
	"payment {uuid} captured amount={big} currency=USD",
	"consumer group rebalanced partitions={n}",
	"flushed {n} {word} to {table} in {dur}",
	"loaded config version {n} from {host}",
	"health check passed",
	"the {word} {word} is ready",
	"{words}",
	"session {session} refreshed for user {user}",
	"query on {table} returned {n} rows in {dur}",
	"published event {word}.{word} to topic {word}",
	"started worker {n} on {host}",
}

var debugMsgs = []string{
	"entering {word} handler",
	"cache lookup key={word}:{big}",
	"acquired lock {word}/{n} after {dur}",
	"sql: SELECT * FROM {table} WHERE id = {obj} LIMIT 1",
	"resolved {host} to {ip}",
	"http request headers parsed count={n}",
	"token validated for user {user} scope={word}",
	"{words}",
	"span {hex8} finished in {dur}",
	"retry budget remaining={n}",
}

var warnMsgs = []string{
	"retrying charge attempt={n}",
	"slow query on {table} took {dur}",
	"upstream {host} responded slowly ({dur})",
	"request timeout after {dur}, retrying",
	"rate limit exceeded for user {user}",
	"connection reset by peer {ip}:{port}",
	"deprecated API {path} called by client {hex8}",
	"heap usage at {pct}% of max",
	"consumer lag {big} on partition {n}",
	"certificate for {host} expires in {n} days",
}

var errorMsgs = []string{
	"failed to process {word}: context deadline exceeded",
	"upstream {host} returned status=503",
	"database error: timeout acquiring connection from pool",
	"dial tcp {ip}:{port}: i/o timeout",
	"payment {uuid} failed code={code}",
	"unhandled exception in {word} handler",
	"could not write to {table}: deadlock detected",
	"invalid token for user {user}: signature mismatch",
}

// Incident messages: rare events, clustered in time (see incident).
var refusedMsgs = []string{
	"dial tcp {ip}:5432: connect: connection refused",
	"failed to connect to postgres at {ip}:5432: connection refused",
	"redis: dial tcp {ip}:6379: connect: connection refused",
	"upstream connect error or disconnect/reset before headers. reset reason: connection refused",
}

var panicMsgs = []string{
	"panic: runtime error: invalid memory address or nil pointer dereference",
	"panic: runtime error: index out of range [{n}] with length {n}",
	"panic: assignment to entry in nil map",
	"panic: send on closed channel",
}

var diskMsgs = []string{
	"write /var/lib/app/data/{hex8}.tmp: no space left on device",
	"disk usage on /var/lib/app at {pct}%: above threshold",
}

var tables = []string{"users", "orders", "payments", "sessions", "carts", "products", "invoices", "events", "shipments", "audit_log"}

var peerHosts = []string{
	"postgres-primary.db.svc.cluster.local", "redis-0.cache.svc.cluster.local", "kafka-2.kafka.svc.cluster.local",
	"api.stripe.com", "auth.internal.example.com", "payments.internal.example.com", "search-7.es.internal",
	"inventory.default.svc", "smtp.sendgrid.net", "s3.us-east-1.amazonaws.com",
}

var errorCodes = []string{
	"E1001", "E1042", "E2003", "ERR_CONN_RESET", "ERR_TIMEOUT", "card_declined", "insufficient_funds",
	"E4290", "ERR_UPSTREAM", "expired_card", "E5003", "do_not_honor",
}

// paths are request paths, most frequent first (Zipf); slots as in messages.
var paths = []string{
	"/healthz", "/v1/users/{user}", "/v1/orders/{obj}", "/metrics", "/v1/products/{n}",
	"/v1/carts/{uuid}", "/api/v2/search?q={word}&page={n}", "/v1/payments/{uuid}/capture",
	"/static/js/app.{build}.js", "/login", "/v1/users/{user}/preferences", "/v1/orders/{obj}/items",
	"/logout", "/v1/inventory/{n}/reserve", "/graphql", "/v1/webhooks/stripe", "/admin/reports/{word}",
	"/v1/shipments/{obj}/track", "/favicon.ico", "/v1/coupons/{hex8}",
}

var userAgents = []string{
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
	"okhttp/4.12.0", "curl/8.5.0", "Go-http-client/2.0", "python-requests/2.32.3", "kube-probe/1.31",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
}

// keyUserID is the index of "user_id" in extraKeys.
const keyUserID = 1

// extraKeys are names of the optional fields that pad lines to length.
var extraKeys = []string{
	"request_id", "user_id", "attempt", "region", "version", "bytes_out", "cache", "pod", "tenant",
	"db_rows", "queue_depth", "retries", "zone", "build", "feature", "client_ip", "elapsed", "shard", "tags", "note",
}

var regions = []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1"}

var threads = []string{"main", "http-nio-8080-exec-", "pool-3-thread-", "kafka-consumer-", "scheduling-", "ForkJoinPool.commonPool-worker-"}
