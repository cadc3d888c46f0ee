package fleet

import (
	"net/url"
	"strings"
)

// consoleLabel is the first label of an OpenShift cluster's web console
// host: console-openshift-console.apps.<cluster>.<base domain>.
const consoleLabel = "console-openshift-console."

// routerLabel is the first label of the host that reaches the cluster's
// default ingress router below the same apps domain.
const routerLabel = "router-default."

// IngressRouterHost derives a cluster's default ingress router host from its
// web console URL (a ClusterDeployment's status.webConsoleURL): the console's
// apps domain prefixed with router-default. It reports false for a URL that
// is not an OpenShift console's, so a record waits for the cluster rather
// than point elsewhere.
func IngressRouterHost(consoleURL string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(consoleURL))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return "", false
	}
	apps, ok := strings.CutPrefix(NormalizeDNSName(u.Hostname()), consoleLabel)
	if !ok || !strings.Contains(apps, ".") {
		return "", false
	}
	host := routerLabel + apps
	if !ValidDNSName(host) {
		return "", false
	}
	return host, true
}
