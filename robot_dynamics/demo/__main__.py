from robot_dynamics.demo import main

raise SystemExit(main())
