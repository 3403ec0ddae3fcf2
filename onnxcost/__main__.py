from onnxcost.cli.app import main

main()
