package shell

import (
	"strings"
)

// registerCloud registers the handlers of cloud and container tools (see loadHandlers).
func registerCloud() {
	register(kubectlCmd, "kubectl", "oc", "k3s", "microk8s.kubectl")
	register(helmCmd, "helm")
	register(terraformCmd, "terraform", "tofu", "terragrunt")
	register(pulumiCmd, "pulumi")
	register(awsCmd, "aws")
	register(verbCloudCmd, "gcloud", "az", "doctl", "hcloud", "linode-cli", "heroku", "fly", "flyctl", "vercel",
		"netlify", "firebase", "railway", "wrangler", "supabase", "eksctl", "gh", "glab", "vultr-cli", "scw",
		"ibmcloud", "oci", "exoscale", "upcloud", "civo", "render")
	register(gsutilCmd, "gsutil")
	register(dockerCmd, "docker", "podman", "nerdctl")
	register(func(c *cmd) {
		c.moderate(scoreModerateHigh, "docker-compose "+c.arg(1))
		dockerCompose(c, c.args())
	}, "docker-compose")
}

// kubectlCmd: deleting cluster resources is dangerous and irreversible,
// draining a node dangerous, reading secrets' data dangerous; get,
// describe and logs are safe; exec runs its command, judged in turn.
func kubectlCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "nsv", "--namespace", "--context", "--cluster", "--kubeconfig", "--server", "--token",
		"--user", "--as", "--as-group", "--request-timeout", "--certificate-authority", "--client-key",
		"--client-certificate", "--cache-dir")
	if i >= len(c.argv) {
		return
	}
	sub := c.argv[i].s
	rest := c.argv[i+1:]
	c.canon = append([]string{c.name, sub}, strs(rest)...)
	ops := operands(rest)
	if dryRun(rest) && sub != "exec" && sub != "attach" && sub != "debug" {
		return // --dry-run=client or server changes nothing
	}
	switch sub {
	case "delete":
		c.danger(scoreDestroy, true, c.name+" delete removes cluster resources")
	case "drain":
		c.danger(scoreDangerous+5, false, c.name+" drain evicts every pod from a node")
	case "get":
		if len(ops) > 0 && (strings.HasPrefix(ops[0].s, "secret")) && revealsData(rest) {
			c.danger(scoreDangerous+5, false, c.name+" get secret -o shows the secrets' values")
		}
	case "describe", "logs", "top", "explain", "api-resources", "api-versions", "version", "cluster-info", "auth",
		"diff", "wait", "events", "completion", "plugin", "options", "help":
	case "config":
		if len(ops) > 0 && !strings.HasPrefix(ops[0].s, "get") && ops[0].s != "view" && ops[0].s != "current-context" {
			c.moderate(scoreModerate, c.name+" config "+ops[0].s+" changes the kubeconfig")
		}
	case "exec", "attach", "debug", "run":
		c.moderate(scoreModerateHigh, c.name+" "+sub+" runs commands in the cluster")
		for k, a := range rest {
			if a.s == "--" {
				c.run(rest[k+1:])
				break
			}
		}
	default:
		c.moderate(scoreModerateHigh, c.name+" "+sub+" changes cluster resources")
	}
}

// dryRun reports whether --dry-run is given with a value other than none.
func dryRun(args []field) bool {
	for _, a := range args {
		if a.s == "--dry-run" || strings.HasPrefix(a.s, "--dry-run=") && a.s != "--dry-run=none" {
			return true
		}
	}
	return false
}

func revealsData(args []field) bool {
	for i, a := range args {
		v := ""
		switch {
		case a.s == "-o" || a.s == "--output":
			if i+1 < len(args) {
				v = args[i+1].s
			}
		case strings.HasPrefix(a.s, "-o"):
			v = strings.TrimPrefix(strings.TrimPrefix(a.s, "-o"), "=")
		case strings.HasPrefix(a.s, "--output="):
			v = strings.TrimPrefix(a.s, "--output=")
		}
		if v != "" && v != "name" && v != "wide" {
			return true
		}
	}
	return false
}

func helmCmd(c *cmd) {
	sub, _ := subcommand(c.argv, 1, "n", "--namespace", "--kube-context", "--kubeconfig")
	if dryRun(c.args()) {
		return
	}
	switch sub {
	case "uninstall", "delete", "del", "un":
		c.danger(scoreDestroy, true, "helm "+sub+" removes a release and its resources")
	case "", "list", "ls", "status", "get", "show", "inspect", "template", "lint", "search", "version", "history",
		"hist", "env", "verify", "help", "completion":
	default:
		c.moderate(scoreModerateHigh, "helm "+sub+" changes cluster resources")
	}
}

func terraformCmd(c *cmd) {
	i := 1
	for i < len(c.argv) && strings.HasPrefix(c.argv[i].s, "-") {
		i++
	}
	if i >= len(c.argv) {
		return
	}
	sub := c.argv[i].s
	rest := c.argv[i+1:]
	c.canon = append([]string{c.name, sub}, strs(rest)...)
	ops := operands(rest)
	op0 := ""
	if len(ops) > 0 {
		op0 = ops[0].s
	}
	switch sub {
	case "destroy":
		c.danger(scoreDestroy, true, c.name+" destroy tears down infrastructure")
	case "apply":
		switch {
		case hasArg(rest, "-destroy", "--destroy"):
			c.danger(scoreDestroy, true, c.name+" apply -destroy tears down infrastructure")
		case hasPrefixArg(rest, "-auto-approve", "--auto-approve"):
			c.danger(scoreDangerous+5, false, c.name+" apply -auto-approve changes infrastructure without review")
		default:
			c.moderate(scoreModerateHigh, c.name+" apply changes infrastructure")
		}
	case "state":
		switch op0 {
		case "list", "show", "pull":
		default:
			c.danger(scoreDangerous+5, false, c.name+" state "+op0+" changes the state of record")
		}
	case "workspace":
		switch op0 {
		case "delete":
			c.danger(scoreDestroy-5, true, c.name+" workspace delete removes a workspace's state")
		case "list", "show":
		default:
			c.moderate(scoreModerate, c.name+" workspace "+op0)
		}
	case "force-unlock":
		c.danger(scoreDangerous, false, c.name+" force-unlock breaks another run's lock")
	case "plan", "validate", "show", "output", "version", "providers", "graph", "console", "help", "-version", "--version", "metadata", "modules":
	case "fmt":
		if !hasArg(rest, "-check", "--check") {
			c.moderate(scoreWrite, c.name+" fmt rewrites files")
		}
	default:
		c.moderate(scoreModerateHigh, c.name+" "+sub+" changes infrastructure or its state")
	}
}

func pulumiCmd(c *cmd) {
	sub, k := subcommand(c.argv, 1, "sC", "--stack", "--cwd")
	op := ""
	if k < len(c.argv) {
		op = c.argv[k].s
	}
	switch {
	case sub == "destroy" || sub == "down":
		c.danger(scoreDestroy, true, "pulumi "+sub+" tears down infrastructure")
	case sub == "stack" && (op == "rm" || op == "remove"):
		c.danger(scoreDestroy, true, "pulumi stack rm removes a stack")
	case sub == "" || sub == "preview" || sub == "whoami" || sub == "about" || sub == "version" || sub == "help" ||
		sub == "stack" && (op == "" || op == "ls" || op == "output" || op == "history") || sub == "config" && (op == "" || op == "get"):
	default:
		c.moderate(scoreModerateHigh, "pulumi "+sub+" changes infrastructure")
	}
}

// awsCmd judges an AWS CLI call by service and operation: deleting and
// terminating is dangerous and irreversible, reading secrets dangerous,
// describe/list/get safe.
func awsCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "", "--profile", "--region", "--output", "--endpoint-url", "--query", "--color",
		"--ca-bundle", "--cli-read-timeout", "--cli-connect-timeout", "--cli-binary-format")
	if i >= len(c.argv) {
		return
	}
	svc := c.argv[i].s
	rest := c.argv[i+1:]
	ops := operands(rest)
	op := ""
	if len(ops) > 0 {
		op = ops[0].s
	}
	c.canon = append([]string{"aws", svc}, strs(rest)...)
	label := "aws " + svc + " " + op
	switch {
	case svc == "s3" && op == "rm":
		if flagged(rest, "", "--recursive") {
			c.danger(scoreDestroy, true, "aws s3 rm --recursive deletes every object under the prefix")
		} else {
			c.add(Moderate, scoreModerateHigh, true, "aws s3 rm deletes an object")
		}
	case svc == "s3" && op == "rb":
		c.danger(scoreDestroy, true, "aws s3 rb removes a bucket")
	case svc == "s3" && op == "sync" && flagged(rest, "", "--delete"):
		c.danger(scoreDestroy-5, true, "aws s3 sync --delete deletes objects at the destination")
	case svc == "s3" && op == "ls":
	case isSecretOp(svc, op, rest):
		c.danger(scoreDangerous+5, false, label+" reveals secrets")
	case hasAnyPrefix(op, "delete", "terminate", "remove", "deregister", "purge", "destroy", "revoke", "deactivate", "disassociate", "detach"):
		c.danger(scoreDestroy, true, label+" deletes or terminates cloud resources")
	case op == "" || op == "help" || op == "wait" || hasAnyPrefix(op, "describe", "list", "get", "head", "lookup", "search", "batch-get", "query", "scan", "validate", "estimate", "simulate", "test-") ||
		svc == "configure" && (op == "list" || op == "list-profiles") || svc == "sts" && op == "get-caller-identity":
	default:
		c.moderate(scoreModerateHigh, label+" changes cloud resources")
	}
}

func isSecretOp(svc, op string, rest []field) bool {
	switch svc + " " + op {
	case "secretsmanager get-secret-value", "secretsmanager batch-get-secret-value", "kms decrypt",
		"sts get-session-token", "sts assume-role", "sts get-federation-token", "iam create-access-key",
		"ecr get-login-password", "ecr get-authorization-token", "configure get", "configure export-credentials",
		"lightsail get-instance-access-details", "ec2 get-password-data", "rds generate-db-auth-token",
		"codeartifact get-authorization-token", "cognito-identity get-credentials-for-identity", "sso get-role-credentials":
		return true
	case "ssm get-parameter", "ssm get-parameters", "ssm get-parameters-by-path":
		return flagged(rest, "", "--with-decryption")
	}
	return false
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// verbCloudCmd judges the many cloud CLIs whose commands read as nouns and
// verbs (gcloud compute instances delete vm): a deleting verb is dangerous
// and irreversible, a reading verb safe, anything else moderate.
func verbCloudCmd(c *cmd) {
	ops := operands(c.args())
	var verbs []string
	for _, o := range ops {
		verbs = append(verbs, strings.ToLower(o.s))
	}
	has := func(vs ...string) bool {
		for _, v := range verbs {
			for _, x := range vs {
				if v == x || strings.HasSuffix(v, ":"+x) {
					return true
				}
			}
		}
		return false
	}
	label := strings.Join(append([]string{c.name}, firstN(verbs, 3)...), " ")
	switch {
	case has("delete", "destroy", "remove", "rm", "uninstall", "purge", "terminate", "wipe", "prune", "drop"):
		c.danger(scoreDestroy, true, label+" deletes cloud resources")
	case has("print-access-token", "print-identity-token", "get-access-token") || has("secrets", "secret") && has("access", "show", "download", "get", "view", "reveal") ||
		c.name == "gh" && has("token"):
		c.danger(scoreDangerous+5, false, label+" reveals secrets or tokens")
	case len(verbs) == 0 || has("list", "ls", "describe", "show", "get", "info", "status", "logs", "version", "whoami", "help", "view", "get-value", "search", "diff", "inspect"):
	default:
		c.moderate(scoreModerateHigh, label+" changes cloud resources")
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func gsutilCmd(c *cmd) {
	sub, k := subcommand(c.argv, 1, "ohuip")
	rest := c.argv[min(k, len(c.argv)):]
	switch sub {
	case "rm":
		if flagged(rest, "ra", "--recursive") {
			c.danger(scoreDestroy, true, "gsutil rm -r deletes every object under the prefix")
		} else {
			c.add(Moderate, scoreModerateHigh, true, "gsutil rm deletes objects")
		}
	case "rb":
		c.danger(scoreDestroy, true, "gsutil rb removes a bucket")
	case "rsync":
		if flagged(rest, "d") {
			c.danger(scoreDestroy-5, true, "gsutil rsync -d deletes objects at the destination")
		} else {
			c.moderate(scoreModerateHigh, "gsutil rsync copies objects")
		}
	case "", "ls", "cat", "du", "stat", "version", "help", "hash":
	default:
		c.moderate(scoreModerateHigh, "gsutil "+sub+" changes cloud storage")
	}
}

// dockerCmd: inspecting is safe; running a container is moderate, and
// dangerous with the host's root (--privileged, the host's / or docker
// socket mounted); deleting volumes is dangerous and irreversible; acting
// on the Portcullis container is blocked.
func dockerCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "Hcl", "--host", "--context", "--config", "--log-level", "--tlscacert", "--tlscert", "--tlskey")
	if i >= len(c.argv) {
		return
	}
	sub := c.argv[i].s
	rest := c.argv[i+1:]
	c.canon = append([]string{c.name, sub}, strs(rest)...)
	ops := operands(rest)
	op0 := ""
	if len(ops) > 0 {
		op0 = ops[0].s
	}
	if sub == "container" || sub == "image" || sub == "volume" || sub == "network" || sub == "system" || sub == "builder" {
		if len(ops) > 0 {
			sub, rest = sub+" "+op0, rest[indexOf(rest, op0)+1:]
		}
	}
	switch sub {
	case "ps", "images", "logs", "inspect", "version", "info", "stats", "top", "history", "port", "diff", "events",
		"search", "help", "container ls", "container list", "container ps", "container inspect", "container logs",
		"image ls", "image list", "image inspect", "image history", "volume ls", "volume list", "volume inspect",
		"network ls", "network list", "network inspect", "system df", "system info", "context", "manifest":
		return
	}
	if namesPortcullis(rest) && sub != "run" && sub != "create" {
		c.block(c.name + " " + sub + " acts on the Portcullis container: an agent must not stop its own gate")
		return
	}
	switch sub {
	case "exec", "container exec":
		_, k := scanOpts(rest, 0, "euwc", "--env", "--user", "--workdir", "--env-file", "--detach-keys")
		c.moderate(scoreModerateHigh, c.name+" exec runs a command in a container")
		if k+1 < len(rest) {
			c.run(rest[k+1:])
		}
	case "run", "create", "container run", "container create":
		if hostAccess(rest) {
			c.danger(scoreDangerHigh, false, c.name+" "+sub+" gives the container root access to the host")
		} else {
			c.moderate(scoreModerateHigh, c.name+" "+sub+" starts a container")
		}
	case "system prune", "volume rm", "volume prune", "volume remove":
		c.danger(scoreDestroy-5, true, c.name+" "+sub+" deletes data for good")
	case "rm", "rmi", "container rm", "image rm":
		all := flagged(rest, "", "--all")
		for _, o := range operands(rest) {
			all = all || !o.static
		}
		if flagged(rest, "f", "--force") && all {
			c.danger(scoreDestroy-5, true, c.name+" "+sub+" -f removes every container or image a substitution lists, running or not")
		} else {
			c.add(Moderate, scoreModerateHigh, true, c.name+" "+sub+" deletes containers or images")
		}
	case "image prune", "container prune", "network prune", "builder prune", "network rm":
		c.add(Moderate, scoreModerateHigh, true, c.name+" "+sub+" deletes containers or images")
	case "compose":
		c.moderate(scoreModerateHigh, c.name+" compose "+op0)
		dockerCompose(c, rest)
	default:
		c.moderate(scoreModerateHigh, c.name+" "+sub)
	}
}

func indexOf(fs []field, s string) int {
	for i, f := range fs {
		if f.s == s {
			return i
		}
	}
	return len(fs) - 1
}

// dockerCompose refines the judgement of docker compose: down -v deletes
// volumes; ps, logs and config only read.
func dockerCompose(c *cmd, rest []field) {
	ops := operands(rest)
	op := ""
	if len(ops) > 0 {
		op = ops[0].s
	}
	switch {
	case op == "down" && flagged(rest, "v", "--volumes"):
		c.danger(scoreDestroy-5, true, "docker compose down -v deletes the project's volumes")
	case op == "ps" || op == "logs" || op == "config" || op == "ls" || op == "images" || op == "top" || op == "version":
		c.findings = c.findings[:len(c.findings)-1] // reading only: drop the moderate judgement
	}
}

func hostAccess(args []field) bool {
	for i, a := range args {
		s := a.s
		next := ""
		if i+1 < len(args) {
			next = args[i+1].s
		}
		switch {
		case s == "--privileged" || s == "--pid=host" || s == "--ipc=host" || s == "--userns=host" ||
			strings.HasPrefix(s, "--cap-add=SYS_ADMIN") || strings.HasPrefix(s, "--cap-add=ALL") ||
			s == "--cap-add" && (next == "SYS_ADMIN" || next == "ALL") || s == "--pid" && next == "host":
			return true
		case s == "-v" || s == "--volume" || s == "--mount":
			if dangerousMount(next) {
				return true
			}
		case strings.HasPrefix(s, "-v") || strings.HasPrefix(s, "--volume=") || strings.HasPrefix(s, "--mount="):
			v := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(s, "--volume="), "--mount="), "-v")
			if dangerousMount(v) {
				return true
			}
		}
	}
	return false
}

func dangerousMount(v string) bool {
	host, _, _ := strings.Cut(v, ":")
	if strings.Contains(v, "source=") {
		for _, kv := range strings.Split(v, ",") {
			if s, ok := strings.CutPrefix(kv, "source="); ok {
				host = s
			} else if s, ok := strings.CutPrefix(kv, "src="); ok {
				host = s
			}
		}
	}
	return host == "/" || strings.Contains(host, "docker.sock") || isSystemPath(host) && !strings.HasPrefix(host, "/var/tmp")
}
