"""Public helpers shared by the rule families: ``names`` (dotted names, literal tests), ``nodes``
(expressions and strings), ``calls`` (arguments), ``statements`` (removing a statement), ``guards``
(guarded blocks, availability checks) and ``table_rule`` (the base of rules that look a qualified name up
in a table). A family's own helpers live in its package."""
