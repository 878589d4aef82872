package shell

import (
	"slices"
	"strings"
)

// registerData registers the handlers of database clients (see loadHandlers).
func registerData() {
	register(psqlCmd, "psql")
	register(mysqlCmd, "mysql", "mariadb")
	register(sqliteCmd, "sqlite3", "sqlite", "duckdb")
	register(mongoCmd, "mongo", "mongosh")
	register(redisCmd, "redis-cli", "valkey-cli")
	register(func(c *cmd) { c.danger(scoreDestroy, true, c.name+" deletes a database") }, "dropdb")
	register(func(c *cmd) { c.danger(scoreDangerous+5, false, c.name+" deletes a database role") }, "dropuser")
	register(func(c *cmd) {
		for _, o := range operands(c.args()) {
			if strings.EqualFold(o.s, "drop") {
				c.danger(scoreDestroy, true, "mysqladmin drop deletes a database")
				return
			}
			if strings.EqualFold(o.s, "shutdown") {
				c.danger(scoreDangerous+5, false, "mysqladmin shutdown stops the database server")
				return
			}
		}
		c.moderate(scoreModerate, "mysqladmin")
	}, "mysqladmin")
	register(func(c *cmd) { c.moderate(scoreModerate, c.name+" dumps a database, whose data may be secret") },
		"pg_dump", "pg_dumpall", "mysqldump", "mongodump")
	register(func(c *cmd) {
		if flagged(c.args(), "c", "--clean") || flagged(c.args(), "", "--drop") {
			c.danger(scoreDangerHigh, true, c.name+" --clean drops objects before restoring")
			return
		}
		c.moderate(scoreModerateHigh, c.name+" restores a database")
	}, "pg_restore", "mongorestore")
	register(func(c *cmd) { c.moderate(scoreModerate, c.name+" creates a database") }, "createdb", "createuser")
	register(queryOptCmd("-e", "--execute"), "cqlsh")
	register(queryOptCmd("-q", "--query"), "clickhouse-client", "clickhouse")
}

// psqlCmd reads the SQL of -c (there may be several); with -f it runs a
// file; without either it reads SQL on stdin.
func psqlCmd(c *cmd) {
	opts, _ := scanAll(c.argv, 1, "cdfhpUvoLPFRTz", "--command", "--dbname", "--file", "--host", "--port", "--username",
		"--set", "--variable", "--output", "--log-file", "--pset", "--field-separator", "--record-separator", "--table-attr")
	if c.sqlOpts(opts, "-c", "--command") {
		return
	}
	switch {
	case has(opts, "-l", "--list", "-V", "--version", "--help"):
	case has(opts, "-f", "--file"):
		c.moderate(scoreModerateHigh, "psql runs the SQL file")
	default:
		c.stdinCode(sinkSQL)
	}
}

// sqlOpts judges the SQL given with the named options; it reports whether
// there was any.
func (c *cmd) sqlOpts(opts []opt, names ...string) bool {
	found := false
	for _, o := range opts {
		if slices.Contains(names, o.name) {
			found = true
			c.skipField(o.f)
			f := sqlFinding(c.name, o.val)
			f.lowerable = f.cat == Moderate
			c.findings = append(c.findings, f)
		}
	}
	return found
}

func mysqlCmd(c *cmd) {
	opts, _ := scanAll(c.argv, 1, "euhPDSA", "--execute", "--user", "--host", "--port", "--database", "--socket")
	if c.sqlOpts(opts, "-e", "--execute") {
		return
	}
	if has(opts, "-V", "--version", "--help") {
		return
	}
	c.stdinCode(sinkSQL)
}

func sqliteCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "", "-cmd", "-separator", "-newline", "-nullvalue")
	_ = opts
	var sqls []field
	for k := 1; k < len(c.argv); k++ {
		if c.argv[k].s == "-cmd" && k+1 < len(c.argv) {
			sqls = append(sqls, c.argv[k+1])
		}
	}
	if i < len(c.argv) {
		sqls = append(sqls, c.argv[i+1:]...)
	}
	if len(sqls) == 0 {
		if i >= len(c.argv) && len(c.argv) > 1 {
			return // -version, -help
		}
		c.stdinCode(sinkSQL)
		return
	}
	for _, s := range sqls {
		c.skipField(s)
		f := sqlFinding(c.name, s.s)
		f.lowerable = f.cat == Moderate
		c.findings = append(c.findings, f)
	}
}

func mongoCmd(c *cmd) {
	opts, _ := scanAll(c.argv, 1, "uph", "--eval", "--username", "--password", "--host", "--port", "--file")
	o, ok := value(opts, "--eval")
	if !ok {
		c.moderate(scoreModerate, "opens an interactive "+c.name+" session")
		return
	}
	c.skipField(o.f)
	l := strings.ToLower(strings.ReplaceAll(o.val, " ", ""))
	switch {
	case containsAnyOf(l, "dropdatabase(", ".drop(", "deletemany({})", "remove({})", "deletemany()", "dropuser("):
		c.danger(scoreDestroy, true, c.name+" --eval drops or empties data")
	case containsAnyOf(l, "delete", "remove(", "update", "insert", "drop", "createuser", "grant"):
		c.moderate(scoreModerateHigh, c.name+" --eval changes data")
	case containsAnyOf(l, "find(", "count", "getcollectionnames", "stats(", "aggregate(", "show", "printjson", "version()"):
	default:
		c.moderate(scoreModerate, c.name+" --eval runs a script")
	}
}

func redisCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "hpanusr", "--user", "--pass", "--tls", "--cacert")
	if i >= len(c.argv) {
		c.moderate(scoreModerate, "opens an interactive "+c.name+" session")
		return
	}
	switch strings.ToUpper(c.argv[i].s) {
	case "FLUSHALL", "FLUSHDB":
		c.danger(scoreDestroy, true, c.name+" "+strings.ToUpper(c.argv[i].s)+" deletes every key")
	case "SHUTDOWN", "DEBUG":
		c.danger(scoreDangerous+5, false, c.name+" "+strings.ToUpper(c.argv[i].s)+" stops or disturbs the server")
	case "DEL", "UNLINK", "EXPIRE", "GETDEL", "HDEL", "SREM", "ZREM", "LPOP", "RPOP":
		c.add(Moderate, scoreModerateHigh, true, c.name+" deletes keys")
	case "GET", "KEYS", "SCAN", "INFO", "PING", "TTL", "PTTL", "TYPE", "EXISTS", "HGET", "HGETALL", "HKEYS", "LRANGE",
		"SMEMBERS", "ZRANGE", "STRLEN", "DBSIZE", "MGET", "HLEN", "LLEN", "SCARD", "ZCARD", "MONITOR", "CLIENT", "SLOWLOG", "MEMORY", "--SCAN", "--BIGKEYS":
	default:
		c.moderate(scoreModerate, c.name+" "+c.argv[i].s)
	}
}

// queryOptCmd builds the handler of a database client whose query comes
// with an option.
func queryOptCmd(names ...string) handler {
	return func(c *cmd) {
		opts, _ := scanAll(c.argv, 1, strings.Join(shortLetters(names), ""), names...)
		if !c.sqlOpts(opts, names...) {
			c.stdinCode(sinkSQL)
		}
	}
}

func shortLetters(names []string) []string {
	var out []string
	for _, n := range names {
		if len(n) == 2 && n[0] == '-' {
			out = append(out, n[1:])
		}
	}
	return out
}

// sqlFinding judges SQL text: DROP, TRUNCATE, and DELETE or UPDATE without
// a real WHERE are dangerous and irreversible; reading is safe; anything
// else moderate.
func sqlFinding(client, sql string) finding {
	best := finding{cat: Safe, score: scoreSafe}
	worse := func(f finding) {
		if f.score > best.score {
			best = f
		}
	}
	for _, raw := range splitSQL(sql) {
		s := normSQL(raw)
		if s == "" {
			continue
		}
		word, rest, _ := strings.Cut(s, " ")
		if strings.HasPrefix(word, ".") { // sqlite3's dot commands
			switch word {
			case ".SHELL", ".SYSTEM":
				worse(finding{cat: Dangerous, score: scoreDangerous, reason: client + " runs a shell command from SQL"})
			case ".OUTPUT", ".ONCE", ".SAVE", ".BACKUP", ".EXCEL", ".CLONE":
				worse(finding{cat: Moderate, score: scoreWrite, reason: client + " " + strings.ToLower(word) + " writes a file"})
			case ".READ", ".IMPORT", ".LOAD", ".RESTORE", ".OPEN":
				worse(finding{cat: Moderate, score: scoreModerate, reason: client + " " + strings.ToLower(word) + " loads a file"})
			}
			continue
		}
		switch {
		case strings.HasPrefix(s, `\!`):
			worse(finding{cat: Dangerous, score: scoreDangerous, reason: client + " runs a shell command from SQL"})
		case word == "DROP":
			worse(finding{cat: Dangerous, score: scoreDestroy, irreversible: true, reason: "DROP " + firstWord(rest) + " via " + client})
		case word == "TRUNCATE":
			worse(finding{cat: Dangerous, score: scoreDestroy, irreversible: true, reason: "TRUNCATE via " + client})
		case word == "DELETE" || word == "UPDATE":
			_, cond, hasWhere := strings.Cut(s, " WHERE ")
			switch {
			case !hasWhere:
				worse(finding{cat: Dangerous, score: scoreDestroy, irreversible: true, reason: word + " without WHERE via " + client + " changes every row"})
			case tautology(cond):
				worse(finding{cat: Dangerous, score: scoreDestroy, irreversible: true, reason: word + " … WHERE " + strings.TrimSpace(cond) + " via " + client + " changes every row"})
			default:
				worse(finding{cat: Moderate, score: scoreModerateHigh, irreversible: word == "DELETE", reason: word + " via " + client})
			}
		case word == "ALTER" && strings.Contains(s, " DROP "):
			worse(finding{cat: Dangerous, score: scoreDestroy - 5, irreversible: true, reason: "ALTER … DROP via " + client})
		case word == "SELECT" || word == "SHOW" || word == "EXPLAIN" || word == "DESCRIBE" || word == "DESC" ||
			word == "VALUES" || word == "TABLE" || word == "PRAGMA" && !strings.Contains(s, "=") ||
			word == "WITH" && !containsAnyOf(s, " DELETE ", " UPDATE ", " INSERT ", " DROP ") ||
			strings.HasPrefix(s, `\D`) || strings.HasPrefix(s, `\L`) || s == `\Q` || strings.HasPrefix(s, `\CONNINFO`) ||
			s == "BEGIN" || s == "COMMIT":
			if strings.Contains(s, " INTO OUTFILE") || strings.Contains(s, " INTO DUMPFILE") {
				worse(finding{cat: Moderate, score: scoreWrite, reason: "SELECT … INTO OUTFILE via " + client + " writes a file"})
			}
		default:
			worse(finding{cat: Moderate, score: scoreModerateHigh, reason: word + " via " + client + " changes the database"})
		}
	}
	return best
}

// splitSQL splits SQL text at semicolons outside quotes.
func splitSQL(s string) []string {
	var out []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == ';' || c == '\n' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '.'):
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// normSQL upper-cases a statement, drops -- comments and collapses blanks.
func normSQL(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	return strings.ToUpper(strings.Join(strings.Fields(strings.Join(lines, " ")), " "))
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// tautology reports whether a WHERE condition holds for every row: 1=1,
// TRUE, x OR 1=1.
func tautology(cond string) bool {
	c := strings.ReplaceAll(cond, " ", "")
	switch c {
	case "1", "TRUE", "1=1", "0=0", "'1'='1'", "'A'='A'", "1<>0", "1!=0", "NOT0", "NOTFALSE", "2>1":
		return true
	}
	return strings.HasPrefix(c, "1=1") || strings.Contains(c, "OR1=1") || strings.Contains(c, "ORTRUE") || strings.HasPrefix(c, "TRUE")
}
