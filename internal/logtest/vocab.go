package logtest

import "strconv"

// Read-only tables the generator draws from. They are package-level because
// they never change; every Generator builds its own per-Config state.
//
// Order matters: the Zipf rank of an entry is its position in its list, so the
// first entries are the most frequent. Changing any list changes the output
// for every seed (the golden test in logtest_test.go will say so).

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
	{"java.lang.IllegalArgumentException", "invalid currency {currency}"},
}

// causes are the "Caused by:" lines under an exception.
var causes = []struct{ class, msg string }{
	{"java.net.ConnectException", "Connection refused"},
	{"java.net.SocketTimeoutException", "connect timed out"},
	{"org.postgresql.util.PSQLException", "ERROR: duplicate key value violates unique constraint \"orders_pkey\""},
	{"java.io.EOFException", "unexpected end of stream on {ip}:{sport}"},
	{"javax.net.ssl.SSLHandshakeException", "PKIX path building failed"},
}

// Message templates by level: the log statements of the services. Real
// logs come from a fixed set of statements, each a constant text with a few
// variable fields (Loghub's template studies find tens to a few hundred per
// system), not from free text; each stream picks them with a Zipf law whose
// ranking is rotated per stream, so every service has its own hot
// statements. Slots in braces are filled by the generator:
// {user} the request's user id, {ip} an internal peer's IPv4, {cip} the
// request's client IPv4, {port} an ephemeral port, {sport} a service's
// port (5432, 6379, ...), {part} a partition, {cents} a price, {n} small number, {big} large number,
// {obj} the id of the order (or row, shipment) the request is about,
// {dur} duration, {uuid} the UUID of the payment (or cart) the request is
// about, {hex8} 8 hex digits, {session} the request's session id, {build}
// the service's build hash, {host} a peer host name, {code} error code,
// {path} a request path, {table} table name, {pct} percentage, {method}
// and {route} the request's method and path, {bytes} a size, {try} a retry
// attempt ("2/5"), {reason} an error cause, {topic} a Kafka topic,
// {event} an event type, {job} a scheduled job, {cache} a cache name,
// {handler} a handler name, {flag} a feature flag, {sku} a product (Zipf),
// {tenant} the user's tenant, {currency}, {q} a search term.
var infoMsgs = []string{
	"Request received: {method} {route}, passing it to the handler",
	"Cache miss for key {cache}:{obj}, loading it from the database at {host}",
	"Query on {table} returned {n} rows in {dur}",
	"Authenticated user {user} via bearer token, tenant={tenant}",
	"Started processing order {obj} for customer {user}",
	"Cache hit for key session:{session}",
	"Published event {event} to the {topic} topic, partition={part} offset={big}",
	"Processing batch {n} of {n} from the {topic} topic",
	"Order {obj} created for user {user} with {n} items, total {cents} cents",
	"Payment {uuid} captured: amount={cents} currency={currency} provider=stripe",
	"User {user} logged in from {cip} using password authentication",
	"Session {session} refreshed for the user {user}, expires in 3600s",
	"Health check passed: the database, cache and queue are reachable",
	"Connection pool stats: active={n} idle={n} waiting=0 max=50",
	"Scheduled job {job} finished in {dur}, {n} records processed",
	"Sent email notification to user {user} template=order_confirmation provider=sendgrid",
	"Consumer group {topic}-consumers rebalanced, assigned partitions={n}",
	"Flushed {n} {event} events to {table} in {dur}",
	"Loaded configuration version {n} from {host}",
	"Started worker {n} for the {topic} queue",
	"Inventory reserved for order {obj}: sku={sku} quantity={n}",
	"Invoice {obj} generated for tenant {tenant} with {n} line items",
	"Token issued for user {user}, scope=\"orders:read orders:write\", ttl=3600s",
	"Feature flag {flag} evaluated to true for user {user}",
	"Retry succeeded for request to {host} after {n} attempts",
	"Checkout completed for cart {uuid}, order {obj}",
	"Search for q={q} returned {n} results in {dur}",
	"Price calculated for sku={sku}: base={cents} cents, tax included",
	"Webhook delivered to {host} event={event} status=200 in {dur}",
	"Refreshed {n} entries in the local {cache} cache in {dur}",
	"Accepted connection from {ip}:{port}",
	"Closed idle connection to {ip}:{sport} after 300s",
	"Committed offset {big} for partition {part} of {topic}",
	"Rate limiter for user {user}: {n} of 100 requests used in the current window",
	"Snapshot of table {table} written to S3 ({bytes} bytes) in {dur}",
	"Migration check complete: schema version {n} is up to date",
	"GC pause {dur}, heap after collection {n}MB of 2048MB",
	"Shipment {obj} handed to carrier ups, label created",
	"Sent push notification to user {user} for order {obj}",
	"Password changed for user {user}, all other sessions revoked",
	"Cart {uuid} updated: added sku={sku} quantity={n}",
	"Refund of {cents} cents issued for payment {uuid}",
	"Connected to {host}",
	"Heartbeat sent to {host}",
	"Job {job} started",
	"Cache warmed: {n} keys",
}

var debugMsgs = []string{
	"Entering {handler} handler for {method} {route}",
	"SQL: SELECT id, user_id, status, total_cents, created_at FROM {table} WHERE id = {obj} LIMIT 1",
	"Cache lookup key={cache}:{obj} result=miss",
	"Resolved {host} to {ip}",
	"Acquired the lock on {cache}:{obj} after {dur}",
	"SQL: UPDATE {table} SET status = 'processing', updated_at = now() WHERE id = {obj}",
	"Token validated for user {user}, scope=orders:read, issuer=https://auth.example.com",
	"Response from {host}: status=200 bytes={bytes} duration={dur}",
	"HTTP request headers parsed: count={n} content-length={bytes}",
	"Calling {host} {method} /internal/v1/{table}/{obj}",
	"Connection {ip}:{sport} returned to the pool",
	"Loaded user {user} from the cache, tenant={tenant}",
	"SQL: INSERT INTO audit_log (user_id, action, object_id) VALUES ({user}, 'update', {obj})",
	"Transaction committed: {n} statements in {dur}",
	"Kafka poll returned {n} records from {topic}",
	"Validated request body against schema {event} v{n}",
	"Retry budget remaining={n} for upstream {host}",
	"Feature flag {flag} not set for tenant {tenant}, using the default",
	"Serialized response body: {bytes} bytes, content-type=application/json",
	"Span finished in {dur}",
	"Released the lock on {cache}:{obj}",
	"Cache hit for {cache}:{obj}",
	"Polling {topic}",
	"Flushing metrics",
	"Computed cache key {cache}:{obj} (ttl 300s)",
}

var warnMsgs = []string{
	"Retrying request to {host} (attempt {try}) after {reason}",
	"Slow query took {dur}: SELECT * FROM {table} WHERE user_id = {user}",
	"Upstream {host} responded slowly ({dur}), p99 threshold is 500ms",
	"Request timeout after {dur}, retrying",
	"Rate limit exceeded for user {user}: {n} requests in 60s, limit 100",
	"Connection reset by peer {ip}:{port}",
	"Retrying charge for order {obj} (attempt {try}) after {code}",
	"Deprecated API {method} {route} called by user {user}",
	"Heap usage at {pct}% of max, consider raising -Xmx",
	"Consumer lag {n} on partition {part} of {topic}",
	"Failed login attempt for user {user} from {cip}: invalid password",
	"Certificate for {host} expires in {n} days",
	"Cache eviction rate high: {n} evictions/s in the {cache} cache",
	"Payment {uuid} requires 3DS authentication, redirecting user {user}",
	"Inventory low for sku={sku}: {n} units left",
	"Circuit breaker for {host} is half-open after {n} failures",
	"Token for user {user} expires in {n}s, refreshing",
	"Queue {topic} depth {n} above warning threshold 100",
	"Slow response {method} {route} took {dur}",
}

var errorMsgs = []string{
	"Failed to process {event} event for order {obj}: context deadline exceeded",
	"Upstream {host} returned status=503 Service Unavailable",
	"Database error: timeout acquiring connection from pool after 30000ms",
	"dial tcp {ip}:{sport}: i/o timeout",
	"Payment {uuid} failed: code={code}",
	"Unhandled exception in {handler} handler",
	"Could not write to {table}: deadlock detected",
	"Invalid token for user {user}: signature mismatch",
	"Failed to send notification to user {user}: {reason}",
	"Order {obj} could not be reserved: sku={sku} out of stock",
	"Webhook delivery to {host} failed after {n} attempts: {reason}",
	"Error while committing offsets for {topic}: the group is rebalancing",
	"Request to {host} failed, the error was: {reason}",
}

// Populations of the slots above: small, fixed sets, as a service has a
// few caches, topics, jobs and handlers.
var (
	reasons     = []string{"context deadline exceeded", "connection reset by peer", "EOF", "503 Service Unavailable", "i/o timeout", "TLS handshake timeout", "502 Bad Gateway", "too many requests"}
	topics      = []string{"orders.created", "payments.captured", "inventory.reserved", "user.events", "notifications.email", "audit.log", "shipments.updated", "search.reindex"}
	eventTypes  = []string{"OrderCreated", "PaymentCaptured", "InventoryReserved", "UserSignedUp", "CartUpdated", "ShipmentDispatched", "RefundIssued", "InvoiceGenerated"}
	jobs        = []string{"cleanup-expired-sessions", "reconcile-payments", "send-daily-digest", "reindex-products", "rotate-signing-keys", "expire-carts"}
	caches      = []string{"user", "session", "product", "cart", "price", "inventory", "token"}
	handlers    = []string{"CreateOrder", "GetUser", "CapturePayment", "UpdateCart", "SearchProducts", "ReserveInventory", "TrackShipment", "Login"}
	flags       = []string{"new-checkout-flow", "async-capture", "search-v2", "bulk-pricing", "one-click-reorder"}
	currencies  = []string{"USD", "EUR", "GBP", "CAD", "JPY"}
	searchTerms = []string{"shoes", "laptop", "coffee", "headphones", "desk", "jacket", "phone case", "backpack", "monitor", "running", "gift card", "charger"}
)

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

// paths are request paths, most frequent first (Zipf); slots as in
// messages. routes are the same paths as the router names them (the route
// pattern that structured access logs carry beside the path).
var paths = []string{
	"/healthz", "/v1/users/{user}", "/v1/orders/{obj}", "/metrics", "/v1/products/{sku}",
	"/v1/carts/{uuid}", "/api/v2/search?q={q}&page={n}", "/v1/payments/{uuid}/capture",
	"/static/js/app.{build}.js", "/login", "/v1/users/{user}/preferences", "/v1/orders/{obj}/items",
	"/logout", "/v1/inventory/{sku}/reserve", "/graphql", "/v1/webhooks/stripe", "/admin/reports/{job}",
	"/v1/shipments/{obj}/track", "/favicon.ico", "/v1/coupons/{hex8}",
}

var routes = []string{
	"/healthz", "/v1/users/:id", "/v1/orders/:id", "/metrics", "/v1/products/:sku",
	"/v1/carts/:id", "/api/v2/search", "/v1/payments/:id/capture",
	"/static/*", "/login", "/v1/users/:id/preferences", "/v1/orders/:id/items",
	"/logout", "/v1/inventory/:sku/reserve", "/graphql", "/v1/webhooks/stripe", "/admin/reports/:name",
	"/v1/shipments/:id/track", "/favicon.ico", "/v1/coupons/:code",
}
var userAgents = []string{
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
	"okhttp/4.12.0", "curl/8.5.0", "Go-http-client/2.0", "python-requests/2.32.3", "kube-probe/1.31",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
}

// keyUserID is the index of "user_id" in extraKeys.
const keyUserID = 1

// extraKeys are the context fields that structured loggers add to a line
// (request-scoped fields from middleware, deployment fields from the
// process), most frequent first; they make up a line's length beyond its
// message. At most 32 (a bit mask tracks which a line has).
var extraKeys = []string{
	"request_id", "user_id", "route", "http_method", "caller", "region", "version", "attempt",
	"bytes_out", "cache", "pod", "tenant", "db_rows", "queue_depth", "env", "user_agent",
	"retries", "zone", "build", "feature", "client_ip", "elapsed", "shard", "component",
}

// components are the subsystems a statement belongs to.
var components = []string{"http", "db", "cache", "kafka", "scheduler", "auth"}

const numExtraKeys = 24

// columns are the columns of every table, in order; table i has the first
// 6+i of them.
var columns = []string{
	"id", "status", "created_at", "updated_at", "user_id", "tenant_id", "version", "total_cents",
	"currency", "external_ref", "metadata", "deleted_at", "region", "source",
}

// newORMSelects returns the queries an ORM generates to load a batch of rows of
// each table, Hibernate style (alias.column as column_N_M_), up to the
// list of ids. Built with the other tables (newTables).
func newORMSelects() []string {
	ss := make([]string, len(tables))
	for i, t := range tables {
		alias := t[:1] + "0_"
		s := "select "
		for j, c := range columns[:min(len(columns), 6+i)] {
			if j > 0 {
				s += ", "
			}
			s += alias + "." + c + " as " + c + strconv.Itoa(j+1) + "_" + strconv.Itoa(i) + "_"
		}
		ss[i] = s + " from " + t + " " + alias + " where " + alias + ".id in ("
	}
	return ss
}

// callerFiles are the source files statements live in; a statement's
// caller (file:line) is fixed, as a logger reports where it was called.
var callerFiles = []string{
	"handler/orders.go", "handler/payments.go", "service/checkout.go", "store/postgres.go",
	"cache/redis.go", "client/http.go", "worker/consumer.go", "auth/token.go", "service/inventory.go",
	"notify/email.go",
}

// servicePorts are the ports of the databases, caches and services a
// service dials.
var servicePorts = []string{"5432", "6379", "9092", "8080", "443", "3306"}

var regions = []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1"}

var threads = []string{"main", "http-nio-8080-exec-", "pool-3-thread-", "kafka-consumer-", "scheduling-", "ForkJoinPool.commonPool-worker-"}
