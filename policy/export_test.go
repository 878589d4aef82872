package policy

// Match exposes the lint's pattern matcher to the tests.
func Match(pattern, name string) bool {
	m, _ := match(pattern, name, -1)
	return m
}

// Keys lists the keys of every mapping the parser reads, by mapping.
var Keys = map[string][]string{
	"top":              topKeys,
	"tool":             toolKeys,
	"element":          elementKeys,
	"gatekeeper":       gatekeeperKeys,
	"scope":            scopeKeys,
	"autonomy":         autonomyKeys,
	"shell":            shellKeys,
	"shell rule":       shellRuleKeys,
	"validator":        validatorKeys,
	"validator scope":  validatorScopeKeys,
	"validator budget": validatorBudgetKeys,
	"migration":        migrationKeys,
	"approvals":        approvalsKeys,
	"audit":            auditKeys,
	"retention":        retentionKeys,
	"budget":           budgetKeys,
	"budget cost":      budgetCostKeys,
	"test file":        testFileKeys,
	"case":             caseKeys,
	"want":             wantKeys,
	"conflict":         conflictKeys,
}
